/** A whole-number input of the submit form bound to one field of the form. */
import type { SpecForm } from "../../lib/specForm";

export type SetField = <K extends keyof SpecForm>(key: K, value: SpecForm[K]) => void;

export function NumberInput({
  id,
  field,
  form,
  set,
  testId,
  disabled = false,
  placeholder,
}: {
  id: string;
  field: keyof SpecForm;
  form: SpecForm;
  set: SetField;
  testId?: string;
  disabled?: boolean;
  placeholder?: string;
}) {
  return (
    <input
      id={id}
      type="number"
      min="1"
      step="1"
      inputMode="numeric"
      data-testid={testId}
      value={form[field] as string}
      disabled={disabled}
      placeholder={placeholder}
      onInput={(e) => set(field, e.currentTarget.value as never)}
    />
  );
}

/** One input per hyperparameter of the chosen template, with its range and help. */
import type { Template } from "../api/types";
import { FieldError } from "../components/bits";

interface Props {
  template: Template | undefined;
  values: Record<string, string | boolean>;
  errors: Map<string, string[]>;
  onChange: (name: string, value: string | boolean) => void;
}

const range = (min: number | null | undefined, max: number | null | undefined) =>
  min != null && max != null ? `${min} – ${max}` : min != null ? `≥ ${min}` : max != null ? `≤ ${max}` : "";

export function HyperparameterFields({ template, values, errors, onChange }: Props) {
  return (
    <fieldset class="hyperparameters">
      <legend>Hyperparameters{template ? ` (${template.name})` : ""}</legend>
      {(template?.hyperparameters ?? []).map((hp) => {
        const id = `hp-${hp.name}`;
        const value = values[hp.name];
        const hint = [hp.help, range(hp.minimum, hp.maximum)].filter(Boolean).join(" · ");
        return (
          <div class="hp" key={hp.name}>
            <label for={id}>{hp.name}</label>
            {hp.choices ? (
              <select id={id} data-testid={id} value={String(value)} onChange={(e) => onChange(hp.name, e.currentTarget.value)}>
                {hp.choices.map((c) => (
                  <option value={c}>{c}</option>
                ))}
              </select>
            ) : hp.type === "boolean" ? (
              <input id={id} data-testid={id} type="checkbox" checked={value === true} onChange={(e) => onChange(hp.name, e.currentTarget.checked)} />
            ) : (
              <input
                id={id}
                data-testid={id}
                type="number"
                step={hp.type === "integer" ? "1" : "any"}
                value={String(value ?? "")}
                aria-describedby={`${id}-hint`}
                onInput={(e) => onChange(hp.name, e.currentTarget.value)}
              />
            )}
            <small id={`${id}-hint`} class="muted">
              {hint}
            </small>
            <FieldError field={`hyperparameters.${hp.name}`} errors={errors} />
          </div>
        );
      })}
      <FieldError field="hyperparameters" errors={errors} />
    </fieldset>
  );
}

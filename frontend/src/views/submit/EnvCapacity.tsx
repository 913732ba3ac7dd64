/** The submit form's env box and its "wait for capacity" choice, and what the form refuses itself. */
import { FieldError } from "../../components/bits";
import { parseEnv } from "../../lib/envVars";
import type { SpecForm } from "../../lib/specForm";

type Set = <K extends keyof SpecForm>(key: K, value: SpecForm[K]) => void;

/** Refusals the form makes before asking the server: env text it cannot read (field → messages). */
export function formRefusals(form: SpecForm): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const env = parseEnv(form.env).problem;
  if (env) found.set("env", [env]);
  return found;
}

export function EnvField({ form, set, errors }: { form: SpecForm; set: Set; errors: Map<string, string[]> }) {
  return (
    <>
      <label for="f-env">Environment variables</label>
      <textarea
        id="f-env"
        data-testid="submit-env"
        rows={3}
        spellcheck={false}
        placeholder={"NAME=value, one per line\nNCCL_DEBUG=INFO"}
        value={form.env}
        onInput={(e) => set("env", e.currentTarget.value)}
      />
      <FieldError field="env" errors={errors} />
    </>
  );
}

/** Offered when the server says no node could ever hold the job (or the spec already chose to wait). */
export function WaitForCapacity({ form, set, fit, errors }: { form: SpecForm; set: Set; fit: string | null; errors: Map<string, string[]> }) {
  if (!(fit?.startsWith("no") || form.waitForCapacity)) return null;
  return (
    <>
      <label class="inline wait-for-capacity">
        <input type="checkbox" data-testid="submit-wait-for-capacity" checked={form.waitForCapacity} onChange={(e) => set("waitForCapacity", e.currentTarget.checked)} />
        wait for capacity: queue it until a node this large registers
      </label>
      <FieldError field="wait_for_capacity" errors={errors} />
    </>
  );
}

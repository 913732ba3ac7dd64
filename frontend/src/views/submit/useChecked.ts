/** The submit form's spec, checked by the server a moment after each change (lib/validation.ts). */
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { client, ok } from "../../api/http";
import { checkedFrom, UNCHECKED, Validator, type Checked } from "../../lib/validation";

/** POST /api/jobs/validate for spec (null: nothing to check yet), 400 ms after its last change. */
export function useChecked(spec: Record<string, unknown> | null, known: readonly string[]): Checked {
  const [checked, setChecked] = useState<Checked>(UNCHECKED);
  const fields = useRef(known);
  fields.current = known;
  const validator = useMemo(
    () =>
      new Validator(
        (body) => ok(client.POST("/api/jobs/validate", { body })),
        (outcome) => setChecked(checkedFrom(outcome, fields.current)),
      ),
    [],
  );
  useEffect(() => () => validator.dispose(), [validator]);
  const key = spec ? JSON.stringify(spec) : "";
  useEffect(() => {
    if (spec && validator.check(spec)) setChecked((c) => ({ ...c, status: "checking" }));
  }, [key]);
  return checked;
}

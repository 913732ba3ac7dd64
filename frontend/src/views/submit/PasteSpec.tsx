/** "Paste or upload a YAML/JSON spec": fill the form from it, or submit it as it is. */
import { useState } from "preact/hooks";
import { parse as parseYaml } from "yaml";

type Spec = Record<string, unknown>;

export function PasteSpec({
  busy,
  problems,
  onProblems,
  onFill,
  onSubmit,
}: {
  busy: boolean;
  /** what is wrong with the pasted spec (unparsable, or every refusal of the API's 422), shown under the box */
  problems: string[];
  onProblems: (problems: string[]) => void;
  onFill: (spec: Spec) => void;
  onSubmit: (spec: Spec) => void;
}) {
  const [pasted, setPasted] = useState("");
  const onError = (message: string) => onProblems([message]);

  const pastedSpec = (): Spec | null => {
    try {
      const value: unknown = parseYaml(pasted);
      if (value && typeof value === "object" && !Array.isArray(value)) return value as Spec;
      onError("The pasted text is not a YAML/JSON mapping.");
    } catch (err) {
      onError(`Could not read the pasted text as YAML or JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
    return null;
  };

  return (
    <details class="paste">
      <summary>Paste or upload a YAML/JSON spec</summary>
      <label for="f-paste">JobSpec (YAML or JSON)</label>
      <input
        type="file"
        accept=".yaml,.yml,.json,text/yaml,application/json"
        aria-label="Upload a spec file"
        data-testid="submit-upload"
        onChange={(e) => {
          const file = e.currentTarget.files?.[0];
          if (file) void file.text().then(setPasted);
        }}
      />
      <textarea id="f-paste" data-testid="submit-paste" rows={10} spellcheck={false} value={pasted} onInput={(e) => setPasted(e.currentTarget.value)} />
      <div class="row">
        <button
          type="button"
          class="secondary"
          data-testid="paste-fill"
          onClick={() => {
            const spec = pastedSpec();
            if (spec) onFill(spec);
          }}
        >
          Fill the form
        </button>
        <button
          type="button"
          data-testid="paste-submit"
          disabled={busy}
          onClick={() => {
            const spec = pastedSpec();
            if (spec) onSubmit(spec);
          }}
        >
          Submit as pasted
        </button>
      </div>
      {problems.length > 0 && (
        <div class="field-error" role="alert" data-testid="paste-errors">
          <div>The pasted spec was not submitted{problems.length > 1 ? ` (${problems.length} problems)` : ""}:</div>
          <ul>
            {problems.map((p) => (
              <li>{p}</li>
            ))}
          </ul>
        </div>
      )}
    </details>
  );
}

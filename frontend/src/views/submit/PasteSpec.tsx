/** "Paste or upload a YAML/JSON spec": fill the form from it, or submit it as it is. */
import { useState } from "preact/hooks";
import { parse as parseYaml } from "yaml";

type Spec = Record<string, unknown>;

export function PasteSpec({
  busy,
  onError,
  onFill,
  onSubmit,
}: {
  busy: boolean;
  /** the pasted text is not a mapping, or not YAML/JSON at all */
  onError: (message: string) => void;
  onFill: (spec: Spec) => void;
  onSubmit: (spec: Spec) => void;
}) {
  const [pasted, setPasted] = useState("");

  const pastedSpec = (): Spec | null => {
    try {
      const value: unknown = parseYaml(pasted);
      if (value && typeof value === "object" && !Array.isArray(value)) return value as Spec;
      onError("The pasted text is not a YAML/JSON mapping.");
    } catch (err) {
      onError(`Could not parse the pasted spec: ${String(err)}`);
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
    </details>
  );
}

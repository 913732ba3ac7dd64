/** Script mode of the submit form: a torchrun-style program and its arguments. */
import { FieldError } from "../../components/bits";
import { parseArgs, type SpecForm } from "../../lib/specForm";

/** Script mode: the program to start on every rank (torchrun-style) and its arguments. */
export function ScriptFields({
  form,
  set,
  errors,
}: {
  form: SpecForm;
  set: <K extends keyof SpecForm>(key: K, value: SpecForm[K]) => void;
  errors: Map<string, string[]>;
}) {
  const args = parseArgs(form.args);
  return (
    <>
      <label for="f-script">Script path</label>
      <input
        id="f-script"
        data-testid="submit-script"
        placeholder="train.py"
        spellcheck={false}
        aria-describedby="f-script-help"
        value={form.script}
        onInput={(e) => set("script", e.currentTarget.value)}
      />
      <small id="f-script-help" class="muted">
        relative to the server's script roots (TRAINBOARD_SCRIPT_ROOTS); no “..”
      </small>
      <FieldError field="entrypoint.script" errors={errors} />
      <label for="f-module">or module</label>
      <input
        id="f-module"
        data-testid="submit-module"
        placeholder="pkg.train"
        spellcheck={false}
        value={form.module}
        onInput={(e) => set("module", e.currentTarget.value)}
      />
      <FieldError field="entrypoint.module" errors={errors} />
      <label for="f-args">Arguments</label>
      <textarea
        id="f-args"
        data-testid="submit-args"
        rows={4}
        spellcheck={false}
        placeholder={"one per line, or a shell-like list:\n--epochs 3 --name 'my run'"}
        aria-describedby="f-args-preview"
        value={form.args}
        onInput={(e) => set("args", e.currentTarget.value)}
      />
      <small id="f-args-preview" class="muted" data-testid="submit-args-preview" data-count={args.length}>
        {args.length === 0 ? "no arguments" : `${args.length} argument${args.length === 1 ? "" : "s"}: `}
        {args.map((a) => (
          <code class="arg">{a}</code>
        ))}
      </small>
      <FieldError field="entrypoint.args" errors={errors} />
      <FieldError field="entrypoint" errors={errors} />
      <p class="muted small">No template hyperparameters: the program reads its own settings from its arguments.</p>
    </>
  );
}

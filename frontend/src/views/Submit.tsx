/** Submit a job: a form generated from GET /api/templates; the server's check of it (implications,
 * memory, problems by field, POST /api/jobs/validate) as it is typed; its 422s by field. */
import { useEffect, useMemo, useState } from "preact/hooks";
import { ApiError, client, ok } from "../api/http";
import type { Job, JobSpec, Template } from "../api/types";
import { FieldError, ViewHead } from "../components/bits";
import { fieldErrors, plainIssues } from "../lib/errors";
import { defaultHyperparameters, formFromSpec, initialForm, toSpec, type SpecForm, type SubmitMode } from "../lib/specForm";
import { capacityVerdict, mergeProblems } from "../lib/validation";
import { Link, navigate } from "../router";
import { HyperparameterFields } from "./HyperparameterFields";
import { CloneFrom } from "./submit/CloneFrom";
import { EnvField, formRefusals } from "./submit/EnvCapacity";
import { Implied } from "./submit/Implied";
import { MemoryFit } from "./submit/MemoryFit";
import { PasteSpec } from "./submit/PasteSpec";
import { ParallelismFields, TrainingFields } from "./submit/RunFieldsets";
import { ScriptFields } from "./submit/ScriptFields";
import { useChecked } from "./submit/useChecked";

const FIELDS = [
  "name",
  "template",
  "entrypoint",
  "entrypoint.script",
  "entrypoint.module",
  "entrypoint.args",
  "parallelism",
  "parallelism.strategy",
  "parallelism.devices",
  "parallelism.pipeline_stages",
  "parallelism.microbatches",
  "hyperparameters",
  "precision",
  "grad_accum",
  "checkpoint",
  "checkpoint.every_steps",
  "priority",
  "tags",
  "env",
  "wait_for_capacity",
];

/** The "Runs" switch: each mode and the words beside its radio button. */
const RUN_MODES: readonly (readonly [SubmitMode, string])[] = [
  ["template", "a template"],
  ["script", "my script or module"],
];

/**
 * `clone`: the job whose spec fills the form; submitting then POSTs /api/jobs/{clone}/clone,
 * starting from its checkpoint at `fromStep` when given (the job page's "Clone from step N…").
 */
export function SubmitView({ clone, fromStep = null }: { clone: number | null; fromStep?: number | null }) {
  const [templates, setTemplates] = useState<Template[] | null>(null);
  const [form, setForm] = useState<SpecForm>(initialForm(undefined));
  const [errors, setErrors] = useState<Map<string, string[]>>(new Map());
  const [pasteProblems, setPasteProblems] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [parent, setParent] = useState<Job | null>(null);

  useEffect(() => {
    setParent(null);
    Promise.all([
      ok(client.GET("/api/templates")),
      clone === null ? Promise.resolve(null) : ok(client.GET("/api/jobs/{job_id}", { params: { path: { job_id: clone } } })),
    ])
      .then(([list, source]) => {
        setTemplates(list);
        if (!source) {
          setForm(initialForm(list[0]));
          return;
        }
        const spec = source.spec as unknown as Record<string, unknown>;
        const chosen = list.find((t) => t.name === spec.template) ?? list[0];
        setForm({ ...formFromSpec(spec, initialForm(chosen)), name: `${source.name} (${fromStep === null ? "clone" : `from step ${fromStep}`})` });
        setParent(source);
      })
      .catch((err: unknown) => setErrors(new Map([["", [`Could not load the form: ${String(err)}`]]])));
  }, [clone, fromStep]);

  const template = templates?.find((t) => t.name === form.template);
  const known = useMemo(
    () => [...FIELDS, ...(template?.hyperparameters ?? []).map((hp) => `hyperparameters.${hp.name}`)],
    [template],
  );
  // the name is no part of what the spec implies: an unnamed draft is checked too
  const draft = templates === null ? null : { ...toSpec(form, template), name: form.name.trim() === "" ? "draft" : form.name };
  const checked = useChecked(draft, known);
  const fit = capacityVerdict(checked.answer, form.waitForCapacity);
  // the refusals of the last submit, and the server's live problems with the spec as it is now
  const shown = mergeProblems(errors, checked.problems);

  // a refusal may sit far above the button: bring the first one into view
  useEffect(() => {
    if (errors.size) document.querySelector(".submit .field-error")?.scrollIntoView({ block: "center" });
  }, [errors]);
  const set = <K extends keyof SpecForm>(key: K, value: SpecForm[K]) => setForm((f) => ({ ...f, [key]: value }));

  /** `pasted`: a spec submitted as pasted, whose refusals are listed under the paste box. */
  const post = async (body: unknown, pasted = false) => {
    setBusy(true);
    setErrors(new Map());
    setPasteProblems([]);
    try {
      // the form's candidate spec: the server validates it and answers 422 per field
      const job = await ok(
        parent
          ? client.POST("/api/jobs/{job_id}/clone", {
              params: { path: { job_id: parent.id }, ...(fromStep === null ? {} : { query: { from_step: fromStep } }) },
              body: body as Record<string, unknown>,
            })
          : client.POST("/api/jobs", { body: body as JobSpec }),
      );
      navigate(`/jobs/${job.id}`);
    } catch (err) {
      const refused = err instanceof ApiError && (err.status === 422 || err.status === 400);
      if (pasted) setPasteProblems(refused ? plainIssues(err.detail) : [String(err)]);
      else if (refused) setErrors(fieldErrors(err.detail, known));
      else setErrors(new Map([["", [String(err)]]]));
    } finally {
      setBusy(false);
    }
  };

  if (templates === null) {
    return (
      <section>
        <h1>Submit a job</h1>
        <FieldError field="" errors={errors} />
        {!errors.size && <p class="muted">Loading templates…</p>}
      </section>
    );
  }

  return (
    <section class="submit">
      <ViewHead title={parent ? `Clone job #${parent.id}` : "Submit a job"}>
        <CloneFrom current={parent?.id ?? null} />
      </ViewHead>
      {parent && (
        <p class="muted" data-testid="clone-source">
          Starting from <Link href={`/jobs/${parent.id}`}>#{parent.id} {parent.name}</Link>
          {fromStep !== null && (
            <>
              {" "}
              at its checkpoint of <strong data-testid="clone-from-step">step {fromStep}</strong> (weights and optimizer state)
            </>
          )}
          : change what you need (hyperparameters, devices); the new job records it as its parent.
        </p>
      )}
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const refused = formRefusals(form);
          if (refused.size) setErrors(refused);
          else void post(toSpec(form, template));
        }}
      >
        <div class="form-grid">
          <fieldset>
            <legend>Job</legend>
            <label for="f-name">Name</label>
            <input id="f-name" data-testid="submit-name" value={form.name} onInput={(e) => set("name", e.currentTarget.value)} />
            <FieldError field="name" errors={shown} />
            <span class="label" id="f-mode-label">Runs</span>
            <div class="mode-switch" role="radiogroup" aria-labelledby="f-mode-label">
              {RUN_MODES.map(([mode, words]) => (
                <label class="inline">
                  <input
                    type="radio"
                    name="mode"
                    value={mode}
                    data-testid={`submit-mode-${mode}`}
                    checked={form.mode === mode}
                    onChange={() => set("mode", mode)}
                  />
                  {words}
                </label>
              ))}
            </div>
            {form.mode === "template" ? (
              <>
                <label for="f-template">Template</label>
                <select
                  id="f-template"
                  data-testid="submit-template"
                  value={form.template}
                  onChange={(e) => {
                    const name = e.currentTarget.value;
                    setForm((f) => ({ ...f, template: name, hyperparameters: defaultHyperparameters(templates.find((t) => t.name === name)) }));
                  }}
                >
                  {templates.map((t) => (
                    <option value={t.name}>{t.name}</option>
                  ))}
                </select>
                <FieldError field="template" errors={shown} />
              </>
            ) : (
              <ScriptFields form={form} set={set} errors={shown} />
            )}
            <label for="f-priority">Priority</label>
            <select id="f-priority" data-testid="submit-priority" value={form.priority} onChange={(e) => set("priority", e.currentTarget.value as SpecForm["priority"])}>
              <option value="high">high</option>
              <option value="normal">normal</option>
              <option value="low">low</option>
            </select>
            <FieldError field="priority" errors={shown} />
            <label for="f-tags">Tags</label>
            <input id="f-tags" data-testid="submit-tags" placeholder="comma separated" value={form.tags} onInput={(e) => set("tags", e.currentTarget.value)} />
            <FieldError field="tags" errors={shown} />
            <EnvField form={form} set={set} errors={shown} />
          </fieldset>

          <ParallelismFields form={form} set={set} errors={shown} fit={fit} />
          <TrainingFields form={form} set={set} errors={shown} />

          {form.mode === "template" && (
            <HyperparameterFields
              template={template}
              values={form.hyperparameters}
              errors={shown}
              onChange={(name, value) => setForm((f) => ({ ...f, hyperparameters: { ...f.hyperparameters, [name]: value } }))}
            />
          )}
        </div>

        <Implied checked={checked} fit={fit} script={form.mode === "script"} />
        {form.mode === "template" && <MemoryFit checked={checked} />}
        <FieldError field="" errors={shown} />
        <button type="submit" data-testid="submit-button" disabled={busy}>
          {busy ? "Submitting…" : parent ? "Submit the clone" : "Submit job"}
        </button>
      </form>

      <PasteSpec
        busy={busy}
        problems={pasteProblems}
        onProblems={setPasteProblems}
        onFill={(spec) => {
          const chosen = templates.find((t) => t.name === spec.template);
          setForm(formFromSpec(spec, chosen && chosen !== template ? initialForm(chosen) : form));
          setErrors(new Map());
          setPasteProblems([]);
        }}
        onSubmit={(spec) => void post(spec, true)}
      />
    </section>
  );
}

/** Submit a job: a form generated from GET /api/templates, its implications, and 422s by field. */
import { useEffect, useMemo, useState } from "preact/hooks";
import { parse as parseYaml } from "yaml";
import { ApiError, client, ok } from "../api/http";
import type { Job, JobSpec, Node, Template } from "../api/types";
import { FieldError } from "../components/bits";
import { fieldErrors } from "../lib/errors";
import {
  defaultHyperparameters,
  formFromSpec,
  formImplications,
  initialForm,
  toSpec,
  type SpecForm,
} from "../lib/specForm";
import { Link, navigate } from "../router";
import { HyperparameterFields } from "./HyperparameterFields";
import { CloneFrom } from "./submit/CloneFrom";
import { EnvField, formRefusals, WaitForCapacity } from "./submit/EnvCapacity";
import { fitsCluster, Implied } from "./submit/Implied";
import { MemoryFit } from "./submit/MemoryFit";
import { ScriptFields } from "./submit/ScriptFields";

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

/** `clone`: the job whose spec fills the form; submitting then POSTs /api/jobs/{clone}/clone. */
export function SubmitView({ clone }: { clone: number | null }) {
  const [templates, setTemplates] = useState<Template[] | null>(null);
  const [form, setForm] = useState<SpecForm>(initialForm(undefined));
  const [errors, setErrors] = useState<Map<string, string[]>>(new Map());
  const [busy, setBusy] = useState(false);
  const [pasted, setPasted] = useState("");
  const [parent, setParent] = useState<Job | null>(null);
  const [nodes, setNodes] = useState<Node[] | null>(null);

  useEffect(() => {
    ok(client.GET("/api/nodes")).then((body) => setNodes(body.nodes), () => {});
  }, []);

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
        setForm({ ...formFromSpec(spec, initialForm(chosen)), name: `${source.name} (clone)` });
        setParent(source);
      })
      .catch((err: unknown) => setErrors(new Map([["", [`Could not load the form: ${String(err)}`]]])));
  }, [clone]);

  const template = templates?.find((t) => t.name === form.template);
  const known = useMemo(
    () => [...FIELDS, ...(template?.hyperparameters ?? []).map((hp) => `hyperparameters.${hp.name}`)],
    [template],
  );
  const implied = formImplications(form);
  const fit = fitsCluster(nodes, Number(form.devices));

  // a refusal may sit far above the button: bring the first one into view
  useEffect(() => {
    if (errors.size) document.querySelector(".submit .field-error")?.scrollIntoView({ block: "center" });
  }, [errors]);
  const set = <K extends keyof SpecForm>(key: K, value: SpecForm[K]) => setForm((f) => ({ ...f, [key]: value }));

  const post = async (body: unknown) => {
    setBusy(true);
    setErrors(new Map());
    try {
      // the form's candidate spec: the server validates it and answers 422 per field
      const job = await ok(
        parent
          ? client.POST("/api/jobs/{job_id}/clone", { params: { path: { job_id: parent.id } }, body: body as Record<string, unknown> })
          : client.POST("/api/jobs", { body: body as JobSpec }),
      );
      navigate(`/jobs/${job.id}`);
    } catch (err) {
      if (err instanceof ApiError && (err.status === 422 || err.status === 400)) setErrors(fieldErrors(err.detail, known));
      else setErrors(new Map([["", [String(err)]]]));
    } finally {
      setBusy(false);
    }
  };

  const pastedSpec = (): Record<string, unknown> | null => {
    try {
      const value: unknown = parseYaml(pasted);
      if (value && typeof value === "object" && !Array.isArray(value)) return value as Record<string, unknown>;
      setErrors(new Map([["", ["The pasted text is not a YAML/JSON mapping."]]]));
    } catch (err) {
      setErrors(new Map([["", [`Could not parse the pasted spec: ${String(err)}`]]]));
    }
    return null;
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

  const numberInput = (id: string, key: keyof SpecForm, testId?: string, disabled = false) => (
    <input
      id={id}
      type="number"
      min="1"
      step="1"
      inputMode="numeric"
      data-testid={testId}
      value={form[key] as string}
      disabled={disabled}
      onInput={(e) => set(key, e.currentTarget.value as never)}
    />
  );

  return (
    <section class="submit">
      <div class="view-head">
        <h1>{parent ? `Clone job #${parent.id}` : "Submit a job"}</h1>
        <span class="spacer" />
        <CloneFrom current={parent?.id ?? null} />
      </div>
      {parent && (
        <p class="muted" data-testid="clone-source">
          Starting from <Link href={`/jobs/${parent.id}`}>#{parent.id} {parent.name}</Link>: change what you need; the new job
          records it as its parent.
        </p>
      )}
      <form
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          const refused = formRefusals(form, fit);
          if (refused.size) setErrors(refused);
          else void post(toSpec(form, template));
        }}
      >
        <div class="form-grid">
          <fieldset>
            <legend>Job</legend>
            <label for="f-name">Name</label>
            <input id="f-name" data-testid="submit-name" value={form.name} onInput={(e) => set("name", e.currentTarget.value)} />
            <FieldError field="name" errors={errors} />
            <span class="label" id="f-mode-label">Runs</span>
            <div class="mode-switch" role="radiogroup" aria-labelledby="f-mode-label">
              <label class="inline">
                <input
                  type="radio"
                  name="mode"
                  value="template"
                  data-testid="submit-mode-template"
                  checked={form.mode === "template"}
                  onChange={() => set("mode", "template")}
                />
                a template
              </label>
              <label class="inline">
                <input
                  type="radio"
                  name="mode"
                  value="script"
                  data-testid="submit-mode-script"
                  checked={form.mode === "script"}
                  onChange={() => set("mode", "script")}
                />
                my script or module
              </label>
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
                <FieldError field="template" errors={errors} />
              </>
            ) : (
              <ScriptFields form={form} set={set} errors={errors} />
            )}
            <label for="f-priority">Priority</label>
            <select id="f-priority" data-testid="submit-priority" value={form.priority} onChange={(e) => set("priority", e.currentTarget.value as SpecForm["priority"])}>
              <option value="high">high</option>
              <option value="normal">normal</option>
              <option value="low">low</option>
            </select>
            <FieldError field="priority" errors={errors} />
            <label for="f-tags">Tags</label>
            <input id="f-tags" data-testid="submit-tags" placeholder="comma separated" value={form.tags} onInput={(e) => set("tags", e.currentTarget.value)} />
            <FieldError field="tags" errors={errors} />
            <EnvField form={form} set={set} errors={errors} />
          </fieldset>

          <fieldset>
            <legend>Parallelism</legend>
            <label for="f-strategy">Strategy</label>
            <select id="f-strategy" data-testid="submit-strategy" value={form.strategy} onChange={(e) => set("strategy", e.currentTarget.value as SpecForm["strategy"])}>
              <option value="data">data (DDP replicas)</option>
              <option value="model">model (pipeline stages)</option>
              <option value="hybrid">hybrid (stages × replicas)</option>
            </select>
            <FieldError field="parallelism.strategy" errors={errors} />
            <label for="f-devices">Devices</label>
            {numberInput("f-devices", "devices", "submit-devices")}
            <FieldError field="parallelism.devices" errors={errors} />
            <WaitForCapacity form={form} set={set} fit={fit} errors={errors} />
            <label for="f-stages">Pipeline stages</label>
            {form.strategy === "hybrid" ? (
              numberInput("f-stages", "pipelineStages", "submit-pipeline-stages")
            ) : (
              <input id="f-stages" data-testid="submit-pipeline-stages" disabled value={form.strategy === "model" ? form.devices : "1"} />
            )}
            <FieldError field="parallelism.pipeline_stages" errors={errors} />
            <label for="f-micro">Microbatches</label>
            {numberInput("f-micro", "microbatches", "submit-microbatches", form.strategy === "data")}
            <FieldError field="parallelism.microbatches" errors={errors} />
            <FieldError field="parallelism" errors={errors} />
          </fieldset>

          <fieldset>
            <legend>Training</legend>
            <label for="f-precision">Precision</label>
            <select id="f-precision" data-testid="submit-precision" value={form.precision} onChange={(e) => set("precision", e.currentTarget.value as SpecForm["precision"])}>
              <option value="fp32">fp32</option>
              <option value="bf16">bf16</option>
              <option value="fp16">fp16 (loss scaling)</option>
            </select>
            <FieldError field="precision" errors={errors} />
            <label for="f-accum">Gradient accumulation</label>
            {numberInput("f-accum", "gradAccum", "submit-grad-accum")}
            <FieldError field="grad_accum" errors={errors} />
            <label for="f-ckpt">Checkpoint every (steps)</label>
            <input
              id="f-ckpt"
              type="number"
              min="1"
              placeholder="no periodic checkpoint"
              data-testid="submit-checkpoint-every"
              value={form.checkpointEvery}
              onInput={(e) => set("checkpointEvery", e.currentTarget.value)}
            />
            <FieldError field="checkpoint.every_steps" errors={errors} />
            <FieldError field="checkpoint" errors={errors} />
          </fieldset>

          {form.mode === "template" && (
            <HyperparameterFields
              template={template}
              values={form.hyperparameters}
              errors={errors}
              onChange={(name, value) => setForm((f) => ({ ...f, hyperparameters: { ...f.hyperparameters, [name]: value } }))}
            />
          )}
        </div>

        <Implied implied={implied} fit={fit} script={form.mode === "script"} />
        {form.mode === "template" && <MemoryFit spec={implied ? toSpec(form, template) : null} />}
        <FieldError field="" errors={errors} />
        <button type="submit" data-testid="submit-button" disabled={busy}>
          {busy ? "Submitting…" : parent ? "Submit the clone" : "Submit job"}
        </button>
      </form>

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
              if (spec) {
                const chosen = templates.find((t) => t.name === spec.template);
                setForm(formFromSpec(spec, chosen && chosen !== template ? initialForm(chosen) : form));
                setErrors(new Map());
              }
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
              if (spec) void post(spec);
            }}
          >
            Submit as pasted
          </button>
        </div>
      </details>
    </section>
  );
}

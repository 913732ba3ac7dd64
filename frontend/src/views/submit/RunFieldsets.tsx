/** The submit form's Parallelism and Training fieldsets: how the job spreads and trains. */
import { FieldError } from "../../components/bits";
import type { SpecForm } from "../../lib/specForm";
import { WaitForCapacity } from "./EnvCapacity";
import {
  hasServer,
  MAX_STALENESS_TRADE,
  REDUCE_CHOICES,
  SERVER_CHOICES,
  SYNC_EVERY_TRADE,
  UPDATE_CHOICES,
} from "../../lib/updateMode";
import { NumberInput, type SetField } from "./NumberInput";

interface Props {
  form: SpecForm;
  set: SetField;
  errors: Map<string, string[]>;
}

export function ParallelismFields({ form, set, errors, fit }: Props & { fit: string | null }) {
  return (
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
      <NumberInput id="f-devices" field="devices" form={form} set={set} testId="submit-devices" />
      <FieldError field="parallelism.devices" errors={errors} />
      <WaitForCapacity form={form} set={set} fit={fit} errors={errors} />
      <label for="f-stages">Pipeline stages</label>
      {form.strategy === "hybrid" ? (
        <NumberInput id="f-stages" field="pipelineStages" form={form} set={set} testId="submit-pipeline-stages" />
      ) : (
        <input id="f-stages" data-testid="submit-pipeline-stages" disabled value={form.strategy === "model" ? form.devices : "1"} />
      )}
      <FieldError field="parallelism.pipeline_stages" errors={errors} />
      <label for="f-micro">Microbatches</label>
      <NumberInput id="f-micro" field="microbatches" form={form} set={set} testId="submit-microbatches" disabled={form.strategy === "data"} />
      <FieldError field="parallelism.microbatches" errors={errors} />
      {form.strategy === "data" && <UpdateModeFields form={form} set={set} errors={errors} />}
      <FieldError field="parallelism" errors={errors} />
    </fieldset>
  );
}

/** When replicas update and how gradients meet (data strategy only), one line each on the trade. */
function UpdateModeFields({ form, set, errors }: Props) {
  return (
    <>
      {tradeChoice("update", "Update", UPDATE_CHOICES, { form, set, errors })}
      {form.update === "sync" && tradeChoice("reduce", "Gradients meet by", REDUCE_CHOICES, { form, set, errors })}
      {form.update === "local_sgd" && (
        <>
          <label for="f-sync-every">Average every (steps)</label>
          <NumberInput id="f-sync-every" field="syncEvery" form={form} set={set} testId="submit-sync-every" />
          <div class="muted small">{SYNC_EVERY_TRADE}</div>
          <FieldError field="parallelism.sync_every" errors={errors} />
        </>
      )}
      {form.update === "async" && (
        <>
          <label for="f-max-staleness">Max staleness (updates)</label>
          <NumberInput
            id="f-max-staleness"
            field="maxStaleness"
            form={form}
            set={set}
            placeholder="no bound"
            testId="submit-max-staleness"
          />
          <div class="muted small">{MAX_STALENESS_TRADE}</div>
          <FieldError field="parallelism.max_staleness" errors={errors} />
        </>
      )}
      {hasServer(form.update, form.reduce) && tradeChoice("server", "Server", SERVER_CHOICES, { form, set, errors })}
    </>
  );
}

type ModeField = "update" | "reduce" | "server";

/** One update-mode field: a select over its choices, the chosen one's trade beneath it, its error.
 * Called as a function, so its elements stand in UpdateModeFields' own tree. */
function tradeChoice<K extends ModeField>(
  field: K,
  label: string,
  choices: { value: SpecForm[K]; label: string; trade: string }[],
  { form, set, errors }: Props,
) {
  const chosen = choices.find((c) => c.value === form[field]);
  return (
    <>
      <label for={`f-${field}`}>{label}</label>
      <select id={`f-${field}`} data-testid={`submit-${field}`} value={form[field]} onChange={(e) => set(field, e.currentTarget.value as SpecForm[K])}>
        {choices.map((c) => (
          <option value={c.value}>{c.label}</option>
        ))}
      </select>
      <div class="muted small" data-testid={`submit-${field}-trade`}>{chosen?.trade}</div>
      <FieldError field={`parallelism.${field}`} errors={errors} />
    </>
  );
}

export function TrainingFields({ form, set, errors }: Props) {
  return (
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
      <NumberInput id="f-accum" field="gradAccum" form={form} set={set} testId="submit-grad-accum" />
      <FieldError field="grad_accum" errors={errors} />
      <label for="f-ckpt">Checkpoint every (steps)</label>
      <NumberInput
        id="f-ckpt"
        field="checkpointEvery"
        form={form}
        set={set}
        placeholder="no periodic checkpoint"
        testId="submit-checkpoint-every"
      />
      <FieldError field="checkpoint.every_steps" errors={errors} />
      <FieldError field="checkpoint" errors={errors} />
    </fieldset>
  );
}

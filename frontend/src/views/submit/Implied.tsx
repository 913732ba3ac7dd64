/** What the server says a spec implies, shown beside the submit form before submitting. */
import { formatPercent } from "../../lib/format";
import type { Checked } from "../../lib/validation";

export function Implied({ checked, fit, script }: { checked: Checked; fit: string | null; script: boolean }) {
  const implied = checked.answer?.implications;
  if (!implied) {
    return (
      <p class="implications muted" data-testid="implications-pending">
        {checked.status === "checking" ? "Checking the spec…" : "What this spec implies shows once the fields marked are fixed."}
      </p>
    );
  }
  return (
    <div class="implications" data-testid="implications" aria-live="polite" data-checking={String(checked.status === "checking")}>
      <dl>
        <dt>Data-parallel degree</dt>
        <dd data-testid="implied-dp">{implied.data_parallel_degree}</dd>
        <dt>Pipeline stages</dt>
        <dd>{implied.pipeline_stages}</dd>
        <dt>Global batch</dt>
        <dd data-testid="implied-global-batch">
          {implied.global_batch === null && script ? "set by the script" : `${implied.global_batch ?? "—"} samples / optimizer step`}
        </dd>
        <dt>Pipeline bubble</dt>
        <dd data-testid="implied-bubble">{formatPercent(implied.bubble_fraction, 1)}</dd>
        {fit && (
          <>
            <dt>Fits the cluster</dt>
            <dd data-testid="implied-fits" class={fit.startsWith("no") ? "problem" : undefined}>
              {fit}
            </dd>
          </>
        )}
      </dl>
      {implied.warnings.map((w) => (
        <p class="warning">{w}</p>
      ))}
    </div>
  );
}

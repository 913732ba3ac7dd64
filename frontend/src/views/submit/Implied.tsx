/** What a spec implies, shown beside the submit form before submitting. */
import type { Node } from "../../api/types";
import { formatPercent } from "../../lib/format";
import type { formImplications } from "../../lib/specForm";

/** Whether a one-node gang of `devices` can ever be placed: some node that is not drained has that many. */
export function fitsCluster(nodes: Node[] | null, devices: number): string | null {
  if (!nodes || !Number.isInteger(devices) || devices < 1) return null;
  const open = nodes.filter((n) => !n.drained && n.state !== "lost");
  const largest = Math.max(0, ...open.map((n) => n.devices.length));
  if (devices <= largest) return `yes: the largest node has ${largest} devices`;
  return `no: the largest node that is up has ${largest} devices; this job would wait forever`;
}

export function Implied({ implied, fit, script }: { implied: ReturnType<typeof formImplications>; fit: string | null; script: boolean }) {
  if (!implied) return <p class="implications muted">Fill in the numbers to see what this spec implies.</p>;
  return (
    <div class="implications" data-testid="implications" aria-live="polite">
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
      {[...implied.problems.map((p) => ["problem", p]), ...implied.warnings.map((w) => ["warning", w])].map(([kind, text]) => (
        <p class={kind}>{text}</p>
      ))}
    </div>
  );
}

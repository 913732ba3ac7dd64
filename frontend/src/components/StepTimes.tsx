/** Where each rank's step goes (data / compute / optimizer), throughput, stragglers highlighted. */
import { useEffect, useMemo, useState } from "preact/hooks";
import type { MetricStore } from "../lib/series";
import { PHASES, rankTimes, type RankTimes } from "../lib/steptimes";
import type { Signal } from "../live";
import { TableHead } from "./bits";

/** A phase's share of the step (flex-grow below 1 in total would leave the bar part empty). */
function share(r: RankTimes, phase: (typeof PHASES)[number]): number {
  const total = PHASES.reduce((sum, p) => sum + Math.max(0, r[p] ?? 0), 0);
  return total > 0 ? (Math.max(0, r[phase] ?? 0) / total) * 100 : 0;
}

const ms = (s: number | null) => (s === null ? "—" : `${(s * 1000).toFixed(1)} ms`);

export function StepTimes({ store, changed }: { store: MetricStore; changed: Signal<Set<string>> }) {
  const [tick, setTick] = useState(0);
  useEffect(() => {
    // A table, not a chart: once a second is live enough and costs nothing per point.
    let timer: ReturnType<typeof setTimeout> | null = null;
    const off = changed.on((names) => {
      if (!names.has("step_time") || timer) return;
      timer = setTimeout(() => ((timer = null), setTick((t) => t + 1)), 1000);
    });
    return () => {
      off();
      if (timer) clearTimeout(timer);
    };
  }, [changed]);
  // computed when its second comes, not whenever the page around it renders
  const rows = useMemo(() => rankTimes(store), [store, tick]);
  if (rows.length === 0) return null;
  return (
    <div>
      <h2>Step time by rank (last 20 steps)</h2>
      <table data-testid="step-times">
        <TableHead
          columns={[
            "Rank", "Step", "Breakdown (data · compute · optimizer)", "Samples/s"
          ]}
        />
        <tbody>
          {rows.map((r) => (
            <tr data-testid={`rank-time-${r.rank}`} data-straggler={r.straggler} class={r.straggler ? "straggler" : undefined}>
              <td>
                rank {r.rank}
                {r.straggler && <span class="badge state-failed"> straggler</span>}
              </td>
              <td>{ms(r.step_time)}</td>
              <td>
                <span class="breakdown" aria-hidden="true">
                  {PHASES.map((p, i) => (
                    <span class={`phase phase-${i}`} style={{ flex: `${share(r, p)} 1 0` }} title={`${p.replace("_time", "")}: ${ms(r[p])}`} />
                  ))}
                </span>{" "}
                <span class="muted small">{PHASES.map((p) => ms(r[p])).join(" · ")}</span>
              </td>
              <td>{r.samples_per_s === null ? "—" : r.samples_per_s.toFixed(0)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

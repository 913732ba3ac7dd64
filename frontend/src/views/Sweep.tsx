/** One sweep: its trials (settings, state, metric, rung values, why one stopped) and the best. */
import { useEffect, useState } from "preact/hooks";
import { ApiError, client, ok } from "../api/http";
import type { components } from "../api/schema";
import { StateBadge, ViewHead } from "../components/bits";
import { formatMetric, formatTime } from "../lib/format";
import { problemText } from "../lib/problems";
import { Link } from "../router";

type Sweep = components["schemas"]["SweepOut"];
type Trial = components["schemas"]["TrialOut"];
const POLL_MS = 2000;

export function SweepView({ id }: { id: number }) {
  const [sweep, setSweep] = useState<Sweep | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    ok(client.GET("/api/sweeps/{sweep_id}", { params: { path: { sweep_id: id } } }))
      .then((s) => (setSweep(s), setError(null)))
      .catch((err: unknown) => setError(err instanceof ApiError && err.status === 404 ? "No such sweep." : problemText(err)));
  }, [id, tick]);
  useEffect(() => {
    if (sweep && sweep.state !== "running") return;
    const timer = setTimeout(() => setTick((t) => t + 1), POLL_MS);
    return () => clearTimeout(timer);
  }, [sweep, tick]);

  const cancel = async () => {
    try {
      setSweep(await ok(client.POST("/api/sweeps/{sweep_id}/cancel", { params: { path: { sweep_id: id } } })));
    } catch (err) {
      setError(problemText(err));
    }
  };

  if (!sweep) return error ? <p class="error">{error}</p> : <p class="muted">Loading sweep {id}…</p>;
  const rule = sweep.early_stopping;
  const done = sweep.trials.filter((t) => t.phase === "finished").length;
  return (
    <section class="sweep">
      <ViewHead title={<><span class="muted">Sweep {sweep.id}</span> {sweep.name}</>} badge={<StateBadge state={sweep.state} testId="sweep-state" />}>
        {sweep.state === "running" && (
          <button type="button" class="danger" data-testid="cancel-sweep" onClick={() => void cancel()}>
            Cancel sweep
          </button>
        )}
      </ViewHead>
      {error && <p class="error">{error}</p>}
      <dl class="facts">
        <dt>Search</dt>
        <dd>
          {sweep.method} over {sweep.parameters.join(", ")}
        </dd>
        <dt>Trials</dt>
        <dd data-testid="sweep-progress">
          {done} of {sweep.trials.length} ended, {sweep.max_concurrency} at once
        </dd>
        <dt>Metric</dt>
        <dd>
          {sweep.metric} ({sweep.mode === "min" ? "lower" : "higher"} is better)
        </dd>
        <dt>Early stopping</dt>
        <dd data-testid="sweep-rule">
          {rule
            ? `${rule.rule === "asha" ? `ASHA, keep the best 1/${rule.reduction_factor}` : "median rule"} at steps ${rule.rungs.join(", ")} (from ${rule.min_trials} trials at a rung)`
            : "none"}
        </dd>
        <dt>Best so far</dt>
        <dd data-testid="sweep-best">
          {sweep.best ? (
            <>
              trial {sweep.best.number} (<Link href={`/jobs/${sweep.best.job_id}`}>#{sweep.best.job_id}</Link>): {sweep.metric}{" "}
              {formatMetric(sweep.metric, sweep.best.value)} with {settingText(sweep.best)}
            </>
          ) : (
            <span class="muted">no values yet</span>
          )}
        </dd>
        <dt>Started</dt>
        <dd>{formatTime(sweep.created_at)}</dd>
      </dl>
      <h2>Trials</h2>
      <div class="table-scroll" tabIndex={0} role="region" aria-label="Trials">
        <table class="jobs" data-testid="sweep-trials">
          <thead>
            <tr>
              <th scope="col">Trial</th>
              {sweep.parameters.map((p) => (
                <th scope="col">{p.split(".").pop()}</th>
              ))}
              <th scope="col">Job</th>
              <th scope="col">State</th>
              <th scope="col">Step</th>
              <th scope="col">{sweep.metric}</th>
              {(rule?.rungs ?? []).map((r) => (
                <th scope="col">@{r}</th>
              ))}
              <th scope="col">Why it stopped</th>
            </tr>
          </thead>
          <tbody>
            {sweep.trials.map((t) => (
              <tr data-testid={`trial-${t.number}`} data-state={t.state} class={sweep.best?.number === t.number ? "best" : undefined}>
                <td>{t.number}</td>
                {sweep.parameters.map((p) => (
                  <td>{String(t.setting[p])}</td>
                ))}
                <td>{t.job_id ? <Link href={`/jobs/${t.job_id}`}>#{t.job_id}</Link> : <span class="muted">—</span>}</td>
                <td>
                  <StateBadge state={t.state} />
                </td>
                <td>{t.step}</td>
                <td>{t.value === null || t.value === undefined ? "—" : formatMetric(sweep.metric, t.value)}</td>
                {(rule?.rungs ?? []).map((r) => (
                  <td>{t.rungs[String(r)] === undefined ? "" : formatMetric(sweep.metric, t.rungs[String(r)])}</td>
                ))}
                <td class="wait">
                  <div class="clamp" title={t.early_stop ?? ""} data-testid={`trial-why-${t.number}`}>
                    {t.early_stop ?? ""}
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function settingText(trial: Trial): string {
  return Object.entries(trial.setting)
    .map(([k, v]) => `${k.split(".").pop()}=${String(v)}`)
    .join(", ");
}

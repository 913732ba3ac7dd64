/** Sweeps: the list, and starting one from a YAML description (base spec, search, rule). */
import { useEffect, useState } from "preact/hooks";
import { parse } from "yaml";
import { client, ok } from "../api/http";
import type { components } from "../api/schema";
import { StateBadge, TableHead, ViewHead } from "../components/bits";
import { formatMetric, formatTime } from "../lib/format";
import { problemText } from "../lib/problems";
import { Link, navigate } from "../router";

type Sweep = components["schemas"]["SweepOut"];
type SweepIn = components["schemas"]["SweepIn"];

export const EXAMPLE = `name: lr-search
method: grid            # or random (with trials: N)
max_concurrency: 2
metric: loss
mode: min
parameters:
  hyperparameters.lr:
    values: [0.3, 0.1, 0.03, 0.0001]
  hyperparameters.seed:
    values: [1, 2]
early_stopping:
  rule: asha            # or median
  rungs: [20, 40]       # steps
  reduction_factor: 2
  min_trials: 2
base:
  name: mlp
  template: mlp
  parallelism: {devices: 1}
  hyperparameters: {steps: 80, batch_size: 32}
`;

export function SweepsView() {
  const [sweeps, setSweeps] = useState<Sweep[] | null>(null);
  const [text, setText] = useState(EXAMPLE);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    ok(client.GET("/api/sweeps"))
      .then((body) => setSweeps(body.sweeps))
      .catch((err: unknown) => setError(problemText(err)));
  }, []);

  const start = async (event: Event) => {
    event.preventDefault();
    setError(null);
    let body: SweepIn;
    try {
      body = parse(text) as SweepIn;
    } catch (err) {
      setError(`not valid YAML: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    setBusy(true);
    try {
      const sweep = await ok(client.POST("/api/sweeps", { body }));
      navigate(`/sweeps/${sweep.id}`);
    } catch (err) {
      setError(problemText(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <section>
      <ViewHead title="Sweeps" />
      {sweeps === null ? (
        <p class="muted">Loading…</p>
      ) : sweeps.length === 0 ? (
        <p class="empty">No sweeps yet: start one below.</p>
      ) : (
        <div class="table-scroll" tabIndex={0} role="region" aria-label="Sweeps">
          <table class="jobs" data-testid="sweeps">
            <TableHead columns={["#", "Name", "State", "Trials", "Best", "Started"]} />
            <tbody>
              {sweeps.map((s) => (
                <tr data-testid={`sweep-row-${s.id}`}>
                  <td>{s.id}</td>
                  <td class="name">
                    <Link href={`/sweeps/${s.id}`}>{s.name}</Link>
                  </td>
                  <td>
                    <StateBadge state={s.state} />
                  </td>
                  <td>{s.trials.length}</td>
                  <td>{s.best ? `${formatMetric(s.metric, s.best.value)} (trial ${s.best.number})` : "—"}</td>
                  <td>{formatTime(s.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <h2>Start a sweep</h2>
      <form class="sweep-form" onSubmit={(e) => void start(e)}>
        <p class="muted small">
          Each trial is a job: the base spec with one setting of the parameters (spec paths). Trials run at most max_concurrency at once; the rule stops poor
          ones at its rungs. See docs/sweeps.md.
        </p>
        <textarea rows={24} spellcheck={false} aria-label="Sweep (YAML)" data-testid="sweep-yaml" value={text} onInput={(e) => setText(e.currentTarget.value)} />
        {error && (
          <p class="error" role="alert" data-testid="sweep-error">
            {error}
          </p>
        )}
        <button type="submit" data-testid="start-sweep" disabled={busy}>
          Start sweep
        </button>
      </form>
    </section>
  );
}

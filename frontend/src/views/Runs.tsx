/**
 * The run table: one row per job, columns picked from its settings (any spec path) and final /
 * best metrics; sort, filter, group by a setting with mean ± spread; tick rows to compare.
 * Everything comes from one `GET /api/runs` page (stored summaries): no curve is read here.
 */
import { useEffect, useState } from "preact/hooks";
import { client, ok } from "../api/http";
import type { components } from "../api/schema";
import { StateBadge, ViewHead } from "../components/bits";
import { MAX_COMPARE } from "../data";
import { ComparePicked, usePicks } from "../lib/picks";
import { formatMetric } from "../lib/format";
import { runsFromQuery, runsToQuery, toggleSort, type RunsQuery } from "../lib/runs";
import { Link } from "../router";

type RunTable = components["schemas"]["RunTable"];
type Spread = components["schemas"]["Spread"];
const PAGE = 50;
const REFRESH_MS = 5000;
const STATES = ["", "queued", "running", "succeeded", "failed", "cancelled", "paused", "stopped"];
const ARROW: Record<string, string> = { min: "↓ lower is better", max: "↑ higher is better" };

export function RunsView() {
  const [query, setQuery] = useState<RunsQuery>(() => runsFromQuery(window.location.search));
  const [table, setTable] = useState<RunTable | null>(null);
  const [error, setError] = useState<string | null>(null);
  const { picked, pick, refused } = usePicks(MAX_COMPARE);
  const [addColumn, setAddColumn] = useState("");
  // summaries move while jobs run: read the page again every few seconds
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setTick((t) => t + 1), REFRESH_MS);
    return () => clearInterval(timer);
  }, []);

  const update = (next: Partial<RunsQuery>) => {
    const merged = { ...query, page: 0, ...next };
    setQuery(merged);
    history.replaceState(null, "", `/runs${runsToQuery(merged)}`);
  };
  useEffect(() => {
    const params = {
      column: query.columns,
      metric: query.metrics,
      sort: query.sort,
      state: query.state ? [query.state as components["schemas"]["JobState"]] : undefined,
      tag: query.tag || undefined,
      q: query.q || undefined,
      group: query.group || undefined,
      archived: query.archived as "hide" | "all" | "only",
      limit: PAGE,
      offset: query.page * PAGE,
    };
    ok(client.GET("/api/runs", { params: { query: params } })).then(
      (body) => (setTable(body), setError(null)),
      (err: unknown) => setError(String(err)),
    );
  }, [query, tick]);

  const header = (label: string, key: string, title?: string) => (
    <th scope="col" title={title} aria-sort={query.sort === key ? "ascending" : query.sort === `-${key}` ? "descending" : undefined}>
      <button type="button" class="sort" data-testid={`sort-${key}`} onClick={() => update({ sort: toggleSort(query.sort, key) })}>
        {label}
        {query.sort === key ? " ▲" : query.sort === `-${key}` ? " ▼" : ""}
      </button>
    </th>
  );
  const first = query.page * PAGE;

  return (
    <section>
      <ViewHead title="Runs">
        <ComparePicked picked={picked} refused={refused} max={MAX_COMPARE} testId="runs-compare" />
        <Link href="/" class="button ghost">
          Board
        </Link>
      </ViewHead>
      <div class="runs-controls" role="search">
        <label>
          Search
          <input type="search" data-testid="runs-search" placeholder="name or #id" value={query.q} onInput={(e) => update({ q: e.currentTarget.value })} />
        </label>
        <label>
          State
          <select data-testid="runs-state" value={query.state} onChange={(e) => update({ state: e.currentTarget.value })}>
            {STATES.map((s) => (
              <option value={s}>{s || "all"}</option>
            ))}
          </select>
        </label>
        <label>
          Archived
          <select data-testid="runs-archived" value={query.archived} onChange={(e) => update({ archived: e.currentTarget.value })}>
            <option value="hide">hidden</option>
            <option value="all">shown too</option>
            <option value="only">only archived</option>
          </select>
        </label>
        <label>
          Tag
          <input data-testid="runs-tag" value={query.tag} onChange={(e) => update({ tag: e.currentTarget.value.trim() })} />
        </label>
        <form
          class="inline"
          onSubmit={(e) => {
            e.preventDefault();
            const path = addColumn.trim();
            if (path && !query.columns.includes(path)) update({ columns: [...query.columns, path] });
            setAddColumn("");
          }}
        >
          <label>
            Add a setting column
            <input list="runs-paths" data-testid="runs-add-column" placeholder="hyperparameters.lr" value={addColumn} onInput={(e) => setAddColumn(e.currentTarget.value)} />
          </label>
          <datalist id="runs-paths">
            {table?.setting_paths.map((p) => (
              <option value={p} />
            ))}
          </datalist>
        </form>
        <label>
          Add a metric
          <select data-testid="runs-add-metric" value="" onChange={(e) => e.currentTarget.value && update({ metrics: [...query.metrics, e.currentTarget.value] })}>
            <option value="">choose…</option>
            {table?.metric_names
              .filter((m) => !query.metrics.includes(m))
              .map((m) => (
                <option value={m}>{m}</option>
              ))}
          </select>
        </label>
        <label>
          Group by
          <select data-testid="runs-group" value={query.group} onChange={(e) => update({ group: e.currentTarget.value })}>
            <option value="">no grouping</option>
            {query.columns.map((c) => (
              <option value={c}>{c}</option>
            ))}
          </select>
        </label>
      </div>
      <div class="chips" data-testid="runs-chosen">
        {[...query.columns.map((c) => ["columns", c] as const), ...query.metrics.map((m) => ["metrics", m] as const)].map(([kind, name]) => (
          <span class="pick-chip">
            {name}
            <button type="button" aria-label={`remove ${name}`} onClick={() => update({ [kind]: query[kind].filter((x) => x !== name), ...(query.group === name ? { group: "" } : {}) })}>
              ×
            </button>
          </span>
        ))}
      </div>
      {error && <p class="error">{error}</p>}
      {table && table.groups && <GroupTable table={table} query={query} />}
      {!table ? (
        <p class="muted">Loading runs…</p>
      ) : (
        <>
          <div class="table-scroll" tabIndex={0} role="region" aria-label="Runs">
            <table class="runs" data-testid="runs-table" data-total={table.total}>
              <thead>
                <tr>
                  <th scope="col" aria-label="pick" />
                  {header("#", "id")}
                  {header("Name", "name")}
                  {header("State", "state")}
                  {query.columns.map((c) => header(c, `spec:${c}`))}
                  {query.metrics.flatMap((m) => [header(`${m} final`, `final:${m}`), header(`${m} best`, `best:${m}`, ARROW[table.directions[m] ?? ""] ?? "no best: neither end is better")])}
                </tr>
              </thead>
              <tbody>
                {table.rows.map(({ job, settings, metrics }) => (
                  <tr data-testid={`run-row-${job.id}`}>
                    <td>
                      <input type="checkbox" data-testid={`run-pick-${job.id}`} aria-label={`pick job ${job.id}`} checked={picked.includes(job.id)} onChange={(e) => pick(job.id, e.currentTarget.checked, e.currentTarget)} />
                    </td>
                    <td>{job.id}</td>
                    <td class="name">
                      <Link href={`/jobs/${job.id}`}>{job.name}</Link>
                      {job.sweep_id != null && <span class="muted small"> (sweep #{job.sweep_id}, trial {job.sweep_trial ?? "?"})</span>}
                      {job.archived && <span class="muted small"> (archived)</span>}
                      {job.tags.map((tag) => (
                        <span class="tag">{tag}</span>
                      ))}
                    </td>
                    <td>
                      <StateBadge state={job.state} />
                    </td>
                    {query.columns.map((c) => (
                      <td data-testid={`run-${job.id}-${c}`}>{settings[c] === null || settings[c] === undefined ? "—" : typeof settings[c] === "string" ? settings[c] : JSON.stringify(settings[c])}</td>
                    ))}
                    {query.metrics.flatMap((m) => [
                      <td class="num" data-testid={`run-${job.id}-final-${m}`}>{formatMetric(m, metrics[m]?.final ?? null)}</td>,
                      <td class="num" data-testid={`run-${job.id}-best-${m}`}>{metrics[m]?.best == null ? "—" : formatMetric(m, metrics[m]!.best!)}</td>,
                    ])}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <div class="toolbar">
            <span class="muted" data-testid="runs-range">
              {table.total === 0 ? "No run matches." : `${first + 1}–${first + table.rows.length} of ${table.total}`}
            </span>
            <button type="button" class="ghost" disabled={query.page === 0} onClick={() => update({ page: query.page - 1 })}>
              Previous
            </button>
            <button type="button" class="ghost" data-testid="runs-next" disabled={first + PAGE >= table.total} onClick={() => update({ page: query.page + 1 })}>
              Next
            </button>
          </div>
        </>
      )}
    </section>
  );
}

function spread(s: Spread | undefined, metric: string): string {
  if (!s) return "—";
  return `${formatMetric(metric, s.mean)} ± ${formatMetric(metric, s.std)} (n=${s.n})`;
}

function GroupTable({ table, query }: { table: RunTable; query: RunsQuery }) {
  return (
    <>
      <h2>Grouped by {query.group}: mean ± standard deviation</h2>
      <div class="table-scroll" tabIndex={0} role="region" aria-label="Runs">
        <table class="runs" data-testid="runs-groups">
          <thead>
            <tr>
              <th scope="col">{query.group}</th>
              <th scope="col">Runs</th>
              {query.metrics.flatMap((m) => [<th scope="col">{m} final</th>, <th scope="col">{m} best</th>])}
            </tr>
          </thead>
          <tbody>
            {table.groups!.map((g) => (
              <tr data-testid={`group-${JSON.stringify(g.value)}`}>
                <th scope="row">{g.value === null || g.value === undefined ? "—" : JSON.stringify(g.value)}</th>
                <td>{g.count}</td>
                {query.metrics.flatMap((m) => [
                  <td class="num" data-testid={`group-${JSON.stringify(g.value)}-final-${m}`}>{spread(g.metrics[m]?.final, m)}</td>,
                  <td class="num">{spread(g.metrics[m]?.best, m)}</td>,
                ])}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

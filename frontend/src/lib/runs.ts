/** The run table's address: what it shows lives in the query string (shareable, survives reload). */

export interface RunsQuery {
  columns: string[];
  metrics: string[];
  sort: string;
  state: string;
  tag: string;
  q: string;
  group: string;
  /** Archived jobs: "hide" (default), "all" or "only". */
  archived: string;
  page: number;
}

export const DEFAULT_RUNS: RunsQuery = {
  columns: ["hyperparameters.lr"],
  metrics: ["loss"],
  sort: "-id",
  state: "",
  tag: "",
  q: "",
  group: "",
  archived: "hide",
  page: 0,
};

const list = (text: string | null, fallback: string[]) =>
  text === null ? fallback : text.split(",").map((t) => t.trim()).filter(Boolean);

export function runsFromQuery(search: string): RunsQuery {
  const p = new URLSearchParams(search);
  const page = Number(p.get("page") ?? "0");
  return {
    columns: list(p.get("columns"), DEFAULT_RUNS.columns),
    metrics: list(p.get("metrics"), DEFAULT_RUNS.metrics),
    sort: p.get("sort") || DEFAULT_RUNS.sort,
    state: p.get("state") ?? "",
    tag: p.get("tag") ?? "",
    q: p.get("q") ?? "",
    group: p.get("group") ?? "",
    archived: ["all", "only"].includes(p.get("archived") ?? "") ? p.get("archived")! : "hide",
    page: Number.isInteger(page) && page > 0 ? page : 0,
  };
}

/** Only what differs from the defaults, so a plain /runs stays plain. */
export function runsToQuery(q: RunsQuery): string {
  const p = new URLSearchParams();
  if (q.columns.join(",") !== DEFAULT_RUNS.columns.join(",")) p.set("columns", q.columns.join(","));
  if (q.metrics.join(",") !== DEFAULT_RUNS.metrics.join(",")) p.set("metrics", q.metrics.join(","));
  for (const key of ["sort", "state", "tag", "q", "group", "archived"] as const) if (q[key] && q[key] !== DEFAULT_RUNS[key]) p.set(key, q[key]);
  if (q.page) p.set("page", String(q.page));
  const text = p.toString();
  return text ? `?${text}` : "";
}

/** Clicking a column: sort by it ascending, then descending, then ascending again. */
export function toggleSort(current: string, key: string): string {
  return current === key ? `-${key}` : key;
}

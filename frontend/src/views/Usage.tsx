/** Usage: device-hours allocated against actually busy, per user per UTC day (chart, table, CSV). */
import { useEffect, useMemo, useState } from "preact/hooks";
import uPlot from "uplot";
import { client, ok } from "../api/http";
import { axis, Chart } from "../components/Chart";
import { dailyColumns, hasSlurm, usageCells, usageCsv, type DailyUsageRow } from "../lib/usage";
import { TableHead, ViewHead } from "../components/bits";

const DAY = 86_400_000;

function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function UsageView() {
  const today = Math.floor(Date.now() / DAY) * DAY;
  const [from, setFrom] = useState(isoDay(today - 13 * DAY));
  const [to, setTo] = useState(isoDay(today));
  const [rows, setRows] = useState<DailyUsageRow[] | null>(null);
  const [user, setUser] = useState("");
  const [error, setError] = useState<string | null>(null);
  const window = useMemo(() => ({ from: `${from}T00:00:00Z`, to: new Date(Date.parse(to) + DAY).toISOString() }), [from, to]);

  useEffect(() => {
    let current = true;
    setError(null);
    ok(client.GET("/api/usage/daily", { params: { query: window } }))
      .then((answer) => current && setRows(answer.rows))
      .catch((err: unknown) => current && setError(String(err)));
    return () => {
      current = false;
    };
  }, [window]);

  const users = useMemo(() => [...new Set((rows ?? []).map((r) => r.user))].sort(), [rows]);
  const shown = useMemo(() => (rows ?? []).filter((r) => !user || r.user === user), [rows, user]);
  const cells = useMemo(() => usageCells(shown), [shown]);
  const columns = useMemo(() => dailyColumns(shown, window.from, window.to), [shown, window]);
  const csvHref = useMemo(() => `data:text/csv;charset=utf-8,${encodeURIComponent(usageCsv(cells))}`, [cells]);
  const allocated = cells.reduce((sum, c) => sum + c.allocatedHours, 0);
  const busy = cells.reduce((sum, c) => sum + c.busyHours, 0);
  const slurm = hasSlurm(cells);
  const slurmTotal = cells.reduce((sum, c) => sum + (c.slurmHours ?? 0), 0);

  return (
    <section>
      <ViewHead title="Usage">
        <label class="inline">
          from <input type="date" data-testid="usage-from" value={from} max={to} onChange={(e) => setFrom(e.currentTarget.value)} />
        </label>
        <label class="inline">
          to <input type="date" data-testid="usage-to" value={to} min={from} onChange={(e) => setTo(e.currentTarget.value)} />
        </label>
        <label class="inline">
          user{" "}
          <select data-testid="usage-user" value={user} onChange={(e) => setUser(e.currentTarget.value)}>
            <option value="">all users</option>
            {users.map((name) => (
              <option value={name}>{name}</option>
            ))}
          </select>
        </label>
        <a class="button ghost small" data-testid="usage-csv" href={csvHref} download={`usage-${from}-${to}.csv`}>
          CSV
        </a>
      </ViewHead>
      <p class="muted small">
        Device-hours each user's attempts held (allocated) and kept busy (weighted by sampled utilization), per UTC day.
        Non-admins see their own.
        {slurm && " Slurm allocated: what Slurm's accounting (sacct, AllocTRES × Elapsed) says the same attempts were allocated; both count from the Slurm job's start; they differ by the end (Trainboard's is the supervisors' report, a second or so earlier)."}
      </p>
      {error && <p class="error">{error}</p>}
      {rows === null && !error && <p class="muted">Loading usage…</p>}
      {rows !== null && (
        <>
          <Chart
            key={`${window.from}-${shown.length}-${user}`}
            testId="usage-chart"
            title={`Device-hours per day: allocated vs busy (${user || "all users"})`}
            countAttr="data-days"
            count={(data) => data[0].length}
            data={() => columns}
            subscribe={() => () => {}}
            options={(c) => ({
              scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
              axes: [axis(c), axis(c, { label: "device-hours" })],
              series: [
                {},
                { label: "allocated", stroke: c.series[0], fill: c.series[0] + "55", paths: uPlot.paths.bars!({ size: [0.7, 60] }) },
                { label: "busy", stroke: c.series[1], fill: c.series[1], paths: uPlot.paths.bars!({ size: [0.35, 30] }) },
              ],
            })}
          />
          {cells.length === 0 ? (
            <p class="empty" data-testid="usage-empty">
              No device time in these days.
            </p>
          ) : (
            <div class="table-scroll" tabIndex={0} role="region" aria-label="Usage">
              <table data-testid="usage-table">
                <TableHead
                  columns={[
                    "Day (UTC)", "User", "Allocated device-h", "Busy device-h", "Busy", ...(slurm ? ["Slurm allocated device-h"] : [])
                  ]}
                />
                <tbody>
                  {cells.map((c) => (
                    <tr data-testid={`usage-${c.day}-${c.user}`}>
                      <td>{c.day}</td>
                      <td>{c.user}</td>
                      <td class="num">{c.allocatedHours.toFixed(2)}</td>
                      <td class="num">{c.busyHours.toFixed(2)}</td>
                      <td class="num">{c.busyPercent === null ? "—" : `${c.busyPercent.toFixed(0)} %`}</td>
                      {slurm && (
                        <td class="num" data-testid={`usage-slurm-${c.day}-${c.user}`}>
                          {c.slurmHours === null ? "—" : c.slurmHours.toFixed(2)}
                        </td>
                      )}
                    </tr>
                  ))}
                </tbody>
                <tfoot>
                  <tr>
                    <th scope="row" colSpan={2}>
                      Total
                    </th>
                    <td class="num" data-testid="usage-total-allocated">
                      {allocated.toFixed(2)}
                    </td>
                    <td class="num">{busy.toFixed(2)}</td>
                    <td class="num">{allocated > 0 ? `${((100 * busy) / allocated).toFixed(0)} %` : "—"}</td>
                    {slurm && (
                      <td class="num" data-testid="usage-total-slurm">
                        {slurmTotal.toFixed(2)}
                      </td>
                    )}
                  </tr>
                </tfoot>
              </table>
            </div>
          )}
        </>
      )}
    </section>
  );
}

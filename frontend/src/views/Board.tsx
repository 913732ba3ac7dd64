/**
 * Home, a departures board: the queue in scheduling order with wait reasons, running jobs with
 * progress, ETA and a live loss line, then finished and paused ones; filters; free/busy devices.
 */
import type { ComponentChildren } from "preact";
import { useMemo, useState } from "preact/hooks";
import type { Job } from "../api/types";
import { JobDevices, Progress, StateBadge, TableHead, ViewHead } from "../components/bits";
import { BulkActions, useArchivedJobs } from "../components/BulkActions";
import { ClusterSummary } from "../components/ClusterSummary";
import { Sparkline } from "../components/Sparkline";
import { ComparePicked, usePicks } from "../lib/picks";
import { etaSeconds, filtersFromQuery, filtersToQuery, matches, NO_FILTERS, sections, type Filters } from "../lib/board";
import { formatDuration, formatTime } from "../lib/format";
import { sortedJobs } from "../lib/stores";
import { MAX_COMPARE, useCluster, useJobs } from "../data";
import { Link } from "../router";

export function BoardView() {
  const jobs = useJobs();
  const cluster = useCluster();
  const [showArchived, setShowArchived] = useState(false);
  const [bulkVersion, setBulkVersion] = useState(0);
  const archived = useArchivedJobs(showArchived, bulkVersion);
  const all = useMemo(() => withArchived(jobs, archived, showArchived), [jobs, archived, showArchived]);
  const [filters, setFilters] = useState<Filters>(() => filtersFromQuery(window.location.search));
  const { picked, pick, clear, refused } = usePicks(MAX_COMPARE);
  const shown = useMemo(() => all.filter((j) => matches(j, filters)), [all, filters]);
  const { queued, active, done } = useMemo(() => sections(shown), [shown]);
  const owners = useMemo(() => [...new Set(all.map((j) => j.owner))].sort(), [all]);
  const tags = useMemo(() => [...new Set(all.flatMap((j) => j.tags))].sort(), [all]);
  const [doneLimit, setDoneLimit] = useState(25);

  const setFilter = (key: keyof Filters, value: string) => {
    const next = { ...filters, [key]: value };
    setFilters(next);
    // The filters live in the address (shareable, survives reload) without a history entry each.
    history.replaceState(null, "", `/${filtersToQuery(next)}`);
  };
  const row = { picked, pick };

  return (
    <section>
      <ViewHead title="Jobs">
        <label class="inline" title="Archived jobs are hidden unless this is ticked">
          <input type="checkbox" data-testid="show-archived" checked={showArchived} onChange={(e) => setShowArchived(e.currentTarget.checked)} /> show archived
        </label>
        <BulkActions picked={picked} jobs={all} onDone={() => (clear(), setBulkVersion((v) => v + 1))} />
        <ComparePicked picked={picked} refused={refused} max={MAX_COMPARE} testId="compare-selected" />
        <Link href="/submit" class="button">
          Submit a job
        </Link>
      </ViewHead>
      <ClusterSummary nodes={cluster.nodes} />
      {jobs === null ? (
        <p class="muted">Loading jobs…</p>
      ) : all.length === 0 ? (
        <p class="empty" data-testid="jobs-empty">
          No jobs yet — <Link href="/submit">submit one</Link>
        </p>
      ) : (
        <>
          <div class="toolbar" role="search">
            <FilterSelect label="State" field="state" filters={filters} set={setFilter} any="all" choices={STATE_FILTERS} />
            <FilterSelect label="Owner" field="owner" filters={filters} set={setFilter} any="anyone" choices={owners} />
            <FilterSelect label="Tag" field="tag" filters={filters} set={setFilter} any="any" choices={tags} />
            <input type="search" placeholder="Search by name or #id" aria-label="Search jobs" data-testid="filter-search" value={filters.q} onInput={(e) => setFilter("q", e.currentTarget.value)} />
            {(filters.state || filters.owner || filters.tag || filters.q) && (
              <button type="button" class="ghost" onClick={() => (setFilters(NO_FILTERS), history.replaceState(null, "", "/"))}>
                Clear filters
              </button>
            )}
          </div>
          {shown.length === 0 && <p class="empty">No job matches these filters.</p>}
          {queued.length > 0 && (
            <Section title={`Queued (${queued.length})`} testId="board-queue" head={["", "Pos", "#", "Name", "Priority", "Devices", "Waiting because", "Owner", "Submitted"]}>
              {queued.map((job, i) => (
                <tr key={job.id} data-testid={`job-row-${job.id}`} data-state={job.state} data-position={job.queue_position ?? i + 1}>
                  <PickCell job={job} {...row} />
                  <td class="pos">{job.queue_position ?? i + 1}</td>
                  <td>{job.id}</td>
                  <NameCell job={job} />
                  <td>
                    <span class={`prio prio-${job.priority}`}>{job.priority}</span>
                  </td>
                  <td>{job.spec.parallelism?.devices ?? 1}</td>
                  <td class="wait" data-testid={`wait-reason-${job.id}`}>
                    {job.wait_reason ?? <span class="muted">about to be scheduled</span>}
                  </td>
                  <td>{job.owner}</td>
                  <td>{formatTime(job.created_at)}</td>
                </tr>
              ))}
            </Section>
          )}
          {active.length > 0 && (
            <Section title={`Running (${active.length})`} testId="board-running" head={["", "#", "Name", "State", "Progress", "ETA", "Loss", "Devices", "Attempt", "Owner"]}>
              {active.map((job) => (
                <tr key={job.id} data-testid={`job-row-${job.id}`} data-state={job.state}>
                  <JobCells job={job} row={row} />
                  <td>{formatEta(etaSeconds(job))}</td>
                  <td>
                    <Sparkline jobId={job.id} rank={job.loss_rank} />
                  </td>
                  <td>
                    <JobDevices job={job} />
                  </td>
                  <td>{job.attempt}</td>
                  <td>{job.owner}</td>
                </tr>
              ))}
            </Section>
          )}
          {done.length > 0 && (
            <Section title={`Finished and paused (${done.length})`} testId="board-finished" head={["", "#", "Name", "State", "Progress", "Reason", "Owner", "Finished"]}>
              {done.slice(0, doneLimit).map((job) => (
                <tr key={job.id} data-testid={`job-row-${job.id}`} data-state={job.state}>
                  <JobCells job={job} row={row} />
                  <td class="wait">
                    <div class="clamp" title={job.reason ?? ""}>{job.reason ?? ""}</div>
                  </td>
                  <td>{job.owner}</td>
                  <td data-testid={`finished-${job.id}`}>{job.state === "paused" ? `paused ${formatTime(job.finished_at)}` : formatTime(job.finished_at)}</td>
                </tr>
              ))}
            </Section>
          )}
          {done.length > doneLimit && (
            <button type="button" class="ghost" onClick={() => setDoneLimit((n) => n + 100)}>
              Show more ({done.length - doneLimit} older)
            </button>
          )}
        </>
      )}
    </section>
  );
}

const STATE_FILTERS = ["active", "queued", "running", "paused", "finished", "succeeded", "failed", "cancelled", "stopped"];

interface FilterSelectProps {
  label: string;
  field: keyof Filters;
  filters: Filters;
  set: (field: keyof Filters, value: string) => void;
  any: string;
  choices: string[];
}

function FilterSelect({ label, field, filters, set, any, choices }: FilterSelectProps) {
  return (
    <label class="inline">
      {label}{" "}
      <select data-testid={`filter-${field}`} value={filters[field]} onChange={(e) => set(field, e.currentTarget.value)}>
        <option value="">{any}</option>
        {choices.map((c) => (
          <option value={c}>{c}</option>
        ))}
      </select>
    </label>
  );
}

/** The live list without archived jobs, or with them (the live list's copy wins) when shown. */
function withArchived(jobs: Map<number, Job> | null, archived: Job[], show: boolean): Job[] {
  if (!jobs) return [];
  if (!show) return sortedJobs(jobs).filter((j) => !j.archived);
  const merged = new Map(jobs);
  for (const job of archived) if (!merged.has(job.id)) merged.set(job.id, job);
  return sortedJobs(merged);
}

function formatEta(seconds: number | null): string {
  return seconds === null ? "—" : formatDuration(seconds);
}

function Section({ title, testId, head, children }: { title: string; testId: string; head: string[]; children: ComponentChildren }) {
  return (
    <>
      <h2>{title}</h2>
      <div class="table-scroll" tabIndex={0} role="region" aria-label="Jobs">
      <table class="jobs" data-testid={testId}>
        <TableHead columns={head} />
        <tbody>{children}</tbody>
      </table>
      </div>
    </>
  );
}

type Picking = { picked: number[]; pick: (id: number, on: boolean, box?: HTMLInputElement) => void };

/** The first cells of a running or finished job's row: pick box, id, name, state, progress. */
function JobCells({ job, row }: { job: Job; row: Picking }) {
  return (
    <>
      <PickCell job={job} {...row} />
      <td>{job.id}</td>
      <NameCell job={job} />
      <td>
        <StateBadge state={job.state} />
      </td>
      <td>
        <Progress job={job} />
      </td>
    </>
  );
}

function NameCell({ job }: { job: Job }) {
  return (
    <td class="name">
      <Link href={`/jobs/${job.id}`}>{job.name}</Link>
      {job.archived && <span class="tag">archived</span>}
      {job.sweep_id != null && (
        <Link href={`/sweeps/${job.sweep_id}`} class="muted small">
          {" "}
          (sweep {job.sweep_id})
        </Link>
      )}
      {job.parent_id != null && <span class="muted small"> (clone of #{job.parent_id})</span>}
      {job.tags.map((tag) => (
        <span class="tag">{tag}</span>
      ))}
    </td>
  );
}

function PickCell({ job, picked, pick }: { job: Job } & Picking) {
  return (
    <td class="pick">
      <input
        type="checkbox"
        aria-label={`Select #${job.id} to compare`}
        data-testid={`select-${job.id}`}
        checked={picked.includes(job.id)}
        onChange={(e) => pick(job.id, e.currentTarget.checked, e.currentTarget)}
      />
    </td>
  );
}

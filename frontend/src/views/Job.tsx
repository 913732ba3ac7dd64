/** One job: status, live loss and metric charts, its devices, events, log tail, cancel. */
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ApiError, client, ok } from "../api/http";
import type { Job, JobEvent, JobTopicData, MetricPoint, SnapshotSeries } from "../api/types";
import { JobDevices, Progress, StateBadge, ViewHead } from "../components/bits";
import { useCluster, type Cluster } from "../data";
import { DeviceCharts } from "../components/DeviceCharts";
import { deviceHistory, unionSlices, type DeviceHistory, type Span } from "../lib/deviceHistory";
import { EfficiencyFacts } from "../components/Efficiency";
import { HangStacks } from "../components/HangStacks";
import { MetricCharts } from "../components/MetricCharts";
import { restartIn, formatPercent, formatTime, toDate } from "../lib/format";
import { readImplications } from "../lib/implications";
import { attemptRanks, globalBatchText, runShape, strategyText } from "../lib/runShape";
import { MetricStore } from "../lib/series";
import { LogTail, upsertJob } from "../lib/stores";
import { LogView } from "../components/LogView";
import { FrameBatch, mergeJobChanges, throttle, type JobChanges } from "../lib/frameBatch";
import { StepTimes } from "../components/StepTimes";
import { showsUpdateCosts, UpdateCosts } from "../components/UpdateCosts";
import { JobAttempts } from "./JobAttempts";
import { WaitFacts } from "../components/WaitFacts";
import { Signal, useTopic } from "../live";
import { Link } from "../router";
import { JobActions } from "./JobActions";
import { JobCheckpoints } from "../components/JobCheckpoints";
import { JobNotes } from "../components/JobNotes";
import { JobProvenance } from "../components/Provenance";
import { StartupPhases } from "../components/StartupPhases";

export function JobView({ id }: { id: number }) {
  const [job, setJob] = useState<Job | null>(null);
  const [missing, setMissing] = useState<string | null>(null);
  const [names, setNames] = useState<string[]>([]);
  const [events, setEvents] = useState<JobEvent[]>([]);
  const [eventsVersion, setEventsVersion] = useState(0);
  const metrics = useRef(new MetricStore()).current;
  const changed = useRef(new Signal<Set<string>>()).current;
  const logs = useRef(new LogTail(500)).current;
  const logsChanged = useRef(new Signal<void>()).current;
  const cluster = useCluster();

  // Messages change the stores at once; what they changed is announced once per frame: one
  // chart signal, one log re-render, no page render (only the metric names or the job render it).
  const frame = useRef<FrameBatch<JobChanges> | null>(null);
  if (!frame.current) {
    frame.current = new FrameBatch<JobChanges>(mergeJobChanges, ({ names, logs: newLines, events }) => {
      if (names.size) {
        setNames((held) => (metrics.names().join() === held.join() ? held : metrics.names()));
        changed.emit(names);
      }
      if (newLines) logsChanged.emit();
      if (events) setEventsVersion((v) => v + 1);
    });
  }
  useEffect(() => () => frame.current?.dispose(), []);

  const acceptJob = (incoming: Job) =>
    setJob((held) => {
      if (!held) return incoming;
      const map = new Map([[held.id, held]]);
      return upsertJob(map, incoming) ? incoming : held;
    });

  useEffect(() => {
    ok(client.GET("/api/jobs/{job_id}", { params: { path: { job_id: id } } }))
      .then(acceptJob)
      .catch((err: unknown) => setMissing(err instanceof ApiError && err.status === 404 ? "No such job." : String(err)));
  }, [id]);

  // Events come with state changes and as `events` deltas; the REST list is the one to show.
  useEffect(() => {
    if (!job) return;
    ok(client.GET("/api/jobs/{job_id}/events", { params: { path: { job_id: id } } }))
      .then(setEvents)
      .catch(() => {});
  }, [id, job?.state, job?.attempt, eventsVersion]);

  useTopic(`job:${id}`, (message) => {
    const data = message.data as JobTopicData;
    if (data.job) acceptJob(data.job);
    const names = !data.metrics
      ? new Set<string>()
      : Array.isArray(data.metrics)
        ? metrics.applyPoints(data.metrics as MetricPoint[])
        : metrics.applySnapshot(data.metrics as Record<string, SnapshotSeries>);
    const newLines = !!data.logs && logs.apply(data.logs);
    const events = !!data.events?.length;
    if (names.size || newLines || events) frame.current!.add({ names, logs: newLines, events });
  });

  // The log pane (500 lines) is the page's largest subtree: a job update (about once a second)
  // re-renders the page, not it; its own lines re-render it (LiveLog). The same element skips
  // Preact's diff of it (issue #33: that diff was most of the page's render cost).
  const logSize = job ? attemptRanks(job).length : 0;
  const logPane = useMemo(
    () => job && <LiveLog jobId={job.id} tail={logs} changed={logsChanged} ranks={attemptRanks(job)} />,
    [job?.id, logSize],
  );

  if (missing && !job) {
    return (
      <section>
        <h1>Job {id}</h1>
        <p class="error">{missing}</p>
        <Link href="/">Back to the board</Link>
      </section>
    );
  }
  if (!job) return <p class="muted">Loading job {id}…</p>;

  return (
    <section class="job">
      <ViewHead title={<><span class="muted">#{job.id}</span> {job.name}</>} badge={<StateBadge state={job.state} testId="job-state" />}>
        <JobActions job={job} onChanged={acceptJob} />
      </ViewHead>
      {/* the charts first: at 1280x800 the loss chart is in the first screen, as on a W&B run page */}
      <h2 class="first">Training</h2>
      <StartupPhases job={job} events={events} />
      <MetricCharts store={metrics} changed={changed} names={names} />
      <JobNotes job={job} onChanged={acceptJob} />
      <JobFacts job={job} store={metrics} changed={changed} />
      <EfficiencyFacts jobId={job.id} version={`${job.state}:${job.attempt}:${Math.floor((job.step ?? 0) / 50)}`} />
      <StepTimes store={metrics} changed={changed} />
      {showsUpdateCosts(job.spec) && (
        <UpdateCosts runs={[job]} version={`${job.state}:${job.attempt}:${Math.floor((job.step ?? 0) / 50)}`} />
      )}
      <h2>Devices</h2>
      <JobDeviceCharts job={job} cluster={cluster} />
      <div class="two-col">
        <EventList events={events} />
        {logPane}
      </div>
      <HangStacks jobId={job.id} version={`${job.attempt}:${eventsVersion}`} />
      <JobAttempts job={job} eventsVersion={eventsVersion} />
      <JobCheckpoints job={job} version={`${job.state}:${job.attempt}:${eventsVersion}`} />
      <JobProvenance jobId={job.id} version={`${job.attempt}:${job.state === "running"}`} />
    </section>
  );
}

/**
 * The job's devices from its start, as its loss charts: every attempt's samples on its own
 * devices within its own span (stored, read again when the attempt or state changes), then the
 * live samples of the attempt holding them now. Every node of the gang (JobOut.placement).
 */
function JobDeviceCharts({ job, cluster }: { job: Job; cluster: Cluster }) {
  const [history, setHistory] = useState<DeviceHistory | null>(null);
  useEffect(() => {
    let current = true;
    ok(client.GET("/api/series/devices/{job_id}", { params: { path: { job_id: job.id } } }))
      .then((body) => current && setHistory(deviceHistory(body)))
      .catch(() => {});
    return () => {
      current = false;
    };
  }, [job.id, job.attempt, job.state]);
  const placed = job.placement?.length ? job.placement : job.node ? [{ node: job.node, devices: job.devices }] : [];
  const slices = unionSlices(history?.slices ?? [], placed);
  if (!slices.length) return <p class="muted">No devices assigned yet.</p>;
  // live samples count from the holding attempt's start (until the history says, the job's)
  const since = history ? (history.liveSince ?? Number.POSITIVE_INFINITY) : unixSeconds(job.started_at);
  return (
    <>
      {history && history.spans.length > 0 && <AttemptSpans spans={history.spans} />}
      {slices.map((slice) => (
        <div data-testid={`device-slice-${slice.node}`}>
          {slices.length > 1 && <h3>{slice.node}</h3>}
          <DeviceCharts
            cluster={cluster}
            node={slice.node}
            devices={slice.devices}
            testIdPrefix={slices.length > 1 ? `device-chart-${slice.node}-` : undefined}
            since={since}
            until={unixSeconds(job.finished_at)}
            history={history}
          />
        </div>
      ))}
    </>
  );
}

/** When each attempt held its devices: the gaps between them are the breaks in the lines. */
function AttemptSpans({ spans }: { spans: Span[] }) {
  return (
    <p class="muted small" data-testid="device-spans">
      {spans.length > 1 ? "From the job's start; " : ""}
      {spans.map((s, i) => (
        <span data-testid={`device-span-${s.number}`}>
          {i > 0 && " · "}attempt {s.number}: {formatTime(s.start, false)} – {s.end === null ? "now" : formatTime(s.end, false)}
        </span>
      ))}
    </p>
  );
}

/** An API time as unix seconds (the device samples' clock), or null. */
function unixSeconds(value: string | null | undefined): number | null {
  const date = toDate(value);
  return date ? date.getTime() / 1000 : null;
}

/**
 * How often the log pane and the progress re-render while a job reports, at most, ms: each
 * render of 500 log lines (and the layout its following reads) on every frame was, after the
 * charts, the live page's largest cost (issue #33, benchmarks.job_page_soak).
 */
const LIVE_TEXT_MS = 250;
/**
 * How often the log pane re-renders while it is out of view (and not about to come into it),
 * at most, ms, as a chart out of view redraws (components/Chart.tsx): at 1280x800 the pane sits
 * below the device charts, and re-laying out and repainting its 500 shifting lines four times a
 * second was the largest rendering cost left on a running job's page (issue #33).
 */
const FAR_TEXT_MS = 1000;

/** Call `fn` when `signal` fires, at most once per `ms()` (LIVE_TEXT_MS; the last call never lost). */
function usePaced<T>(signal: Signal<T>, fn: () => void, ms: () => number = () => LIVE_TEXT_MS): void {
  useEffect(() => {
    const paced = throttle(fn, ms);
    const off = signal.on(paced.run);
    return () => {
      off();
      paced.dispose();
    };
  }, [signal]);
}

/**
 * The log pane, re-rendered when lines arrive (a few times a second, once a second while out of
 * view), not with the page; at once when it comes into view.
 */
function LiveLog({ jobId, tail, changed, ranks }: { jobId: number; tail: LogTail; changed: Signal<void>; ranks: number[] }) {
  const [, setVersion] = useState(0);
  const near = useRef(true);
  usePaced(changed, () => setVersion((v) => v + 1), () => (near.current ? LIVE_TEXT_MS : FAR_TEXT_MS));
  const onNear = (now: boolean) => {
    near.current = now;
    if (now) setVersion((v) => v + 1);
  };
  return <LogView jobId={jobId} tail={tail} ranks={ranks} onNear={onNear} />;
}

/**
 * The job's progress: its stored step, or the newest step of the live metric points when
 * ahead (job updates carrying the step are announced about once a second).
 */
function LiveProgress({ job, store, changed }: { job: Job; store: MetricStore; changed: Signal<Set<string>> }) {
  const [live, setLive] = useState(store.newestStep);
  usePaced(changed, () => setLive(store.newestStep));
  return <Progress job={{ ...job, step: Math.max(job.step ?? 0, live) }} />;
}

function JobFacts({ job, store, changed }: { job: Job; store: MetricStore; changed: Signal<Set<string>> }) {
  const imp = readImplications(job.implications);
  const shape = runShape(job); // what the current attempt's engine uses, else the spec's plan
  const planned = shape.planned ? <span class="muted"> (planned)</span> : null;
  return (
    <dl class="facts">
      <dt>Progress</dt>
      <dd data-testid="job-progress">
        <LiveProgress job={job} store={store} changed={changed} />
      </dd>
      <dt>Attempt</dt>
      <dd data-testid="job-attempt">
        {job.attempt}
        {job.restarts ? ` (${job.restarts} restarts)` : ""}
      </dd>
      <dt>Node / devices</dt>
      <dd data-testid="job-devices">
        <JobDevices job={job} />
      </dd>
      <dt>Strategy</dt>
      <dd data-testid="job-strategy">
        {strategyText(shape)}
        {planned}
      </dd>
      <dt>Global batch</dt>
      <dd data-testid="job-global-batch">
        {globalBatchText(shape)}
        {planned}
      </dd>
      <dt>Bubble</dt>
      <dd>{formatPercent(imp.bubble_fraction, 1)}</dd>
      <dt>Owner</dt>
      <dd>{job.owner}</dd>
      {job.sweep_id != null && (
        <>
          <dt>Sweep</dt>
          <dd data-testid="job-sweep">
            <Link href={`/sweeps/${job.sweep_id}`}>sweep {job.sweep_id}</Link>, trial {job.sweep_trial}
          </dd>
        </>
      )}
      {job.parent_id != null && (
        <>
          <dt>Cloned from</dt>
          <dd data-testid="job-parent">
            <Link href={`/jobs/${job.parent_id}`}>#{job.parent_id}</Link> ·{" "}
            <Link href={`/compare?jobs=${job.parent_id},${job.id}`}>compare with it</Link>
          </dd>
        </>
      )}
      <dt>Submitted</dt>
      <dd>{formatTime(job.created_at)}</dd>
      <dt>Started</dt>
      <dd>{formatTime(job.started_at)}</dd>
      <dt>{job.state === "paused" ? "Paused" : "Finished"}</dt>
      <dd data-testid="job-finished">{formatTime(job.finished_at)}</dd>
      <WaitFacts job={job} />
      {job.state === "restarting" && (
        <>
          <dt>Restart</dt>
          {/* what it costs the job, from the server's counts: a platform stop spends none */}
          <dd data-testid="job-restart">
            {restartIn(job.state, job.restart_at, Date.now())} · {job.restarts} of {job.spec.max_restarts} automatic restarts used
          </dd>
        </>
      )}
      {job.reason && (
        <>
          <dt>Reason</dt>
          <dd data-testid="job-reason">{job.reason}</dd>
        </>
      )}
      {imp.warnings.map((w) => (
        <dd class="warning">{w}</dd>
      ))}
    </dl>
  );
}

function EventList({ events }: { events: JobEvent[] }) {
  return (
    <div>
      <h2>Events</h2>
      {events.length === 0 ? (
        <p class="muted">No events yet.</p>
      ) : (
        <ol class="events" data-testid="job-events" tabIndex={0} aria-label="Events">
          {events.map((e) => (
            <li>
              <time>{formatTime(e.time)}</time> <strong>{e.kind}</strong>
              {e.step != null && <span class="muted"> step {e.step}</span>} {e.message}
            </li>
          ))}
        </ol>
      )}
    </div>
  );
}

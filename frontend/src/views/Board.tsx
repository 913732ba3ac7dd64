/** Home: every job, live from the `jobs` topic, and the cluster's free/busy devices. */
import { useEffect, useMemo, useState } from "preact/hooks";
import { api } from "../api/http";
import type { Job, JobsDelta, JobsSnapshot } from "../api/types";
import { JobDevices, Progress, StateBadge } from "../components/bits";
import { ClusterSummary, useCluster } from "../components/ClusterSummary";
import { formatTime } from "../lib/format";
import { busyDevices, jobsFromSnapshot, sortedJobs, upsertJob } from "../lib/stores";
import { useTopic } from "../live";
import { Link } from "../router";

/** The live job list: snapshot then deltas, with a REST read in case the socket is slow. */
export function useJobs(): Map<number, Job> | null {
  const [jobs, setJobs] = useState<Map<number, Job> | null>(null);
  useEffect(() => {
    api<Job[] | JobsSnapshot>("/api/jobs?limit=500")
      .then((body) => setJobs((held) => held ?? jobsFromSnapshot(Array.isArray(body) ? body : body.jobs)))
      .catch(() => {});
  }, []);
  useTopic("jobs", (message) => {
    if (message.type === "snapshot") {
      setJobs(jobsFromSnapshot((message.data as JobsSnapshot).jobs));
      return;
    }
    const { job } = message.data as JobsDelta;
    if (!job) return;
    setJobs((held) => {
      const next = new Map(held ?? []);
      return upsertJob(next, job) ? next : held;
    });
  });
  return jobs;
}

export function BoardView() {
  const jobs = useJobs();
  const cluster = useCluster();
  const list = useMemo(() => (jobs ? sortedJobs(jobs) : []), [jobs]);
  const busy = useMemo(() => busyDevices(list), [list]);

  return (
    <section>
      <div class="view-head">
        <h1>Jobs</h1>
        <Link href="/submit" class="button">
          Submit a job
        </Link>
      </div>
      <ClusterSummary nodes={cluster.nodes} busy={busy} />
      {jobs === null ? (
        <p class="muted">Loading jobs…</p>
      ) : list.length === 0 ? (
        <p class="empty" data-testid="jobs-empty">
          No jobs yet — <Link href="/submit">submit one</Link>
        </p>
      ) : (
        <table class="jobs">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Name</th>
              <th scope="col">State</th>
              <th scope="col">Progress</th>
              <th scope="col">Devices</th>
              <th scope="col">Attempt</th>
              <th scope="col">Owner</th>
              <th scope="col">Submitted</th>
            </tr>
          </thead>
          <tbody>
            {list.map((job) => (
              <tr key={job.id} data-testid={`job-row-${job.id}`} data-state={job.state}>
                <td>{job.id}</td>
                <td>
                  <Link href={`/jobs/${job.id}`}>{job.name}</Link>
                  {job.tags.map((tag) => (
                    <span class="tag">{tag}</span>
                  ))}
                </td>
                <td>
                  <StateBadge state={job.state} />
                </td>
                <td>
                  <Progress job={job} />
                </td>
                <td>
                  <JobDevices job={job} />
                </td>
                <td>{job.attempt}</td>
                <td>{job.owner}</td>
                <td>{formatTime(job.created_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

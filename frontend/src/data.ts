/** Data hooks of the views: REST reads through the typed client, live updates through `live`. */
import { useEffect, useRef, useState } from "preact/hooks";
import { client, ok } from "./api/http";
import type { ClusterData, Comparison, Job, JobsDelta, JobsSnapshot, Node } from "./api/types";
import { DeviceStore } from "./lib/series";
import { jobsFromSnapshot, upsertJob, withHosts } from "./lib/stores";
import { Signal, useTopic } from "./live";

/** The live job list: snapshot then deltas, with a REST read in case the socket is slow. */
export function useJobs(): Map<number, Job> | null {
  const [jobs, setJobs] = useState<Map<number, Job> | null>(null);
  useEffect(() => {
    ok(client.GET("/api/jobs", { params: { query: { limit: 500 } } }))
      .then((body) => setJobs((held) => held ?? jobsFromSnapshot(body.jobs)))
      .catch(() => {});
  }, []);
  useTopic("jobs", (message) => {
    if (message.type === "snapshot") {
      setJobs(jobsFromSnapshot((message.data as JobsSnapshot).jobs));
      return;
    }
    const { job } = message.data as JobsDelta;
    setJobs((held) => {
      const next = new Map(held ?? []);
      return upsertJob(next, job) ? next : held;
    });
  });
  return jobs;
}

export interface Cluster {
  nodes: Node[] | null;
  store: DeviceStore;
  /** Emits the changed "node\0device" keys after each batch of samples. */
  changed: Signal<Set<string>>;
  /** Bumps at most once a second with new samples, for text that shows latest values. */
  tick: number;
  /** Take a node's newer copy (e.g. the answer of a drain). */
  replaceNode: (node: Node) => void;
}

/** The `cluster` topic: nodes with devices and their live samples. */
export function useCluster(): Cluster {
  const [nodes, setNodes] = useState<Node[] | null>(null);
  const [tick, setTick] = useState(0);
  const store = useRef(new DeviceStore()).current;
  const changed = useRef(new Signal<Set<string>>()).current;
  const throttle = useRef<ReturnType<typeof setTimeout> | null>(null);

  useEffect(() => {
    ok(client.GET("/api/nodes"))
      .then((body) => setNodes((held) => held ?? body.nodes))
      .catch(() => {});
    return () => {
      if (throttle.current) clearTimeout(throttle.current);
    };
  }, []);

  useTopic("cluster", (message) => {
    const data = message.data as ClusterData;
    if (data.nodes) {
      const incoming = data.nodes;
      // A snapshot is the whole cluster; a delta carries the nodes that changed.
      setNodes((held) =>
        message.type === "snapshot" || !held
          ? incoming
          : [...held.filter((n) => !incoming.some((m) => m.name === n.name)), ...incoming].sort((a, b) =>
              a.name.localeCompare(b.name),
            ),
      );
    }
    if (data.hosts?.length) {
      const hosts = data.hosts;
      setNodes((held) => (held ? withHosts(held, hosts) : held));
    }
    if (data.samples?.length) {
      const keys = store.apply(data.samples);
      if (keys.size) {
        changed.emit(keys);
        throttle.current ??= setTimeout(() => {
          throttle.current = null;
          setTick((t) => t + 1);
        }, 1000);
      }
    }
  });
  const replaceNode = (node: Node) => setNodes((held) => (held ? held.map((n) => (n.name === node.name ? node : n)) : held));
  return { nodes, store, changed, tick, replaceNode };
}

/** The most jobs one comparison overlays (the compare route's limit). */
export const MAX_COMPARE = 10;

/** Compare's x axes: step, relative time (since each job's first point), the clock, device-hours. */
export type XMode = "step" | "time" | "wall" | "device_hours";

/** The server's comparison of the jobs (spec diff, summaries, downsampled aligned curves). */
export function useComparison(
  ids: number[],
  x: XMode,
): { comparison: Comparison | null; loadedX: XMode; error: string | null } {
  // the x axis the shown comparison was computed for: until the new one arrives, the old one
  // is drawn on its own axis, never under the newly chosen axis' label
  const [loaded, setLoaded] = useState<{ comparison: Comparison; x: XMode } | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let current = true;
    ok(client.GET("/api/series/compare", { params: { query: { job: ids, x } } })).then(
      (body) => current && setLoaded({ comparison: body, x }),
      (err: unknown) => current && setError(String(err)),
    );
    return () => {
      current = false;
    };
  }, [ids.join(","), x]);
  return { comparison: loaded?.comparison ?? null, loadedX: loaded?.x ?? x, error };
}

/** The `cluster` topic: nodes with devices, live samples, and a free/busy overview. */
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api/http";
import type { ClusterData, Node } from "../api/types";
import { DeviceStore } from "../lib/series";
import { withHosts } from "../lib/stores";
import { Signal, useTopic } from "../live";
import { deviceLabel } from "./bits";

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

export function useCluster(): Cluster {
  const [nodes, setNodes] = useState<Node[] | null>(null);
  const [tick, setTick] = useState(0);
  const store = useRef(new DeviceStore()).current;
  const changed = useRef(new Signal<Set<string>>()).current;
  const throttle = useRef<ReturnType<typeof setTimeout> | null>(null);

  useEffect(() => {
    api<Node[] | { nodes: Node[] }>("/api/nodes")
      .then((body) => setNodes((held) => held ?? (Array.isArray(body) ? body : body.nodes)))
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

/** One chip per device: busy (held by an active job) or free. */
export function ClusterSummary({ nodes, busy }: { nodes: Node[] | null; busy: Map<string, Map<number, number>> }) {
  if (!nodes) return null;
  if (nodes.length === 0) return <p class="muted">No worker nodes have registered yet.</p>;
  const total = nodes.reduce((n, node) => n + node.devices.length, 0);
  const isBusy = (node: Node, index: number, jobId: number | null | undefined) => jobId != null || !!busy.get(node.name)?.has(index);
  const used = nodes.reduce((n, node) => n + node.devices.filter((d) => isBusy(node, d.index, d.job_id)).length, 0);
  return (
    <div class="cluster-summary" data-testid="cluster-summary" data-free={total - used} data-busy={used}>
      <strong>
        {total - used} free / {used} busy
      </strong>
      {nodes.map((node) => (
        <span class="node-chips">
          <span class="muted">{node.name}</span>
          {node.devices.map((device) => {
            const job = device.job_id ?? busy.get(node.name)?.get(device.index);
            const label = deviceLabel(device.kind, device.index);
            return (
              <span
                class={`chip ${job === undefined ? "free" : "busy"}`}
                title={job === undefined ? `${label}: free` : `${label}: job ${job}`}
              >
                {device.index}
              </span>
            );
          })}
        </span>
      ))}
    </div>
  );
}

// Who gets the agent port's connection slots (pure: agents/server.ts closes the sockets these
// decisions name and runs the handshake deadline's timers).
//
// The cap (agents/connection-cap.ts) protects the process's descriptors, but on its own it is
// first come, first served: one client that opens connections and never authenticates (idle
// sockets, or HTTP/2 sessions that answer pings) holds every slot and no agent gets in. So, as
// production servers bound connections before they are trusted (Go's ReadHeaderTimeout, nginx's
// limit_conn per address, Envoy's per-source connection limits):
//
// - a connection is *pending* until a Hello on it authenticates (not a probe's: `ws-agent probe`
//   goes away by itself); pending ones are closed at the handshake deadline (server.ts's timer);
// - one source address holds at most `maxPendingPerSource` pending connections: a VM's agent needs
//   one, so the cap only bites a flood (many agents behind one NAT share an address, hence the
//   higher default in standalone mode; their pending time is a handshake, not a lifetime);
// - at the cap, a new connection takes the slot of the oldest pending one, so a flood from many
//   sources cannot keep an agent out: an agent needs its slot for milliseconds (TLS and a Hello)
//   before it authenticates, and the oldest pending one is the connection that had the longest to
//   do so. Only when every slot is authenticated is the new one refused. (A guard sparing young
//   pending connections would let a flood that reopens fast enough keep every slot young.)
// - an authenticated connection belongs to its VM: when a newer connection authenticates as the
//   same VM, the older one is closed (its stream was replaced anyway), so a VM's token buys one slot.

/** A connection that has not authenticated a Hello this long after accept is closed (grpc.handshakeTimeout). */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 30_000;
/**
 * Pending connections one source address may hold (grpc.maxPendingConnectionsPerSource). In
 * Kubernetes every VM's agent comes from its own launcher pod IP (the identity check refuses any
 * other), so a few is plenty; standalone, agents behind one NAT share an address, and a reconnect
 * burst of them is pending at once for the time of a handshake.
 */
export const DEFAULT_PENDING_PER_SOURCE = { kubernetes: 8, standalone: 64 } as const;

export interface ConnectionSlotLimits {
  /** The most connections held at once (undefined: no cap). */
  cap: number | undefined;
  maxPendingPerSource: number;
}

export type SlotAdmission =
  | { kind: "accept" }
  /** Accept once `victim` (the oldest pending connection) is closed. */
  | { kind: "evict"; victim: string }
  | { kind: "refuse"; reason: "cap" | "per-source" };

interface Slot<T> {
  source: string;
  handle: T;
  /** The VM this connection authenticated as; undefined while pending. */
  vm?: string;
}

/**
 * The source address a connection is counted under: an IPv4-mapped IPv6 address (a dual-stack
 * listener's view of an IPv4 peer) counts as its IPv4 address.
 */
export function connectionSource(remoteAddress: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(remoteAddress);
  return (mapped ? mapped[1]! : remoteAddress).toLowerCase();
}

/** The agent port's connections, keyed by the peer string grpc-js gives a stream ("address:port"). */
export class ConnectionSlots<T> {
  private readonly all = new Map<string, Slot<T>>();
  /** Pending connections in the order they were accepted: the first is the oldest. */
  private readonly pending = new Map<string, Slot<T>>();
  private readonly pendingBySource = new Map<string, number>();
  private readonly byVm = new Map<string, string>();

  constructor(private readonly limits: ConnectionSlotLimits) {}

  get size(): number {
    return this.all.size;
  }

  get pendingCount(): number {
    return this.pending.size;
  }

  get cap(): number | undefined {
    return this.limits.cap;
  }

  /** What to do with a new connection from `source`, before it is added. */
  admit(source: string): SlotAdmission {
    if ((this.pendingBySource.get(source) ?? 0) >= this.limits.maxPendingPerSource)
      return { kind: "refuse", reason: "per-source" };
    const { cap } = this.limits;
    if (cap === undefined || this.all.size < cap) return { kind: "accept" };
    const oldest = this.pending.keys().next();
    if (!oldest.done) return { kind: "evict", victim: oldest.value };
    return { kind: "refuse", reason: "cap" };
  }

  add(key: string, source: string, handle: T): void {
    this.remove(key);
    const slot: Slot<T> = { source, handle };
    this.all.set(key, slot);
    this.markPending(key, slot);
  }

  handle(key: string): T | undefined {
    return this.all.get(key)?.handle;
  }

  isPending(key: string): boolean {
    return this.pending.has(key);
  }

  /**
   * A Hello on connection `key` authenticated as `vm`: the connection is no longer pending and is
   * the VM's. Returns the handle of the VM's previous connection, which the caller closes.
   */
  authenticated(key: string, vm: string): T | undefined {
    const slot = this.all.get(key);
    if (!slot) return undefined;
    this.unmarkPending(key, slot);
    if (slot.vm !== undefined && slot.vm !== vm && this.byVm.get(slot.vm) === key) this.byVm.delete(slot.vm);
    slot.vm = vm;
    const previousKey = this.byVm.get(vm);
    this.byVm.set(vm, key);
    if (previousKey === undefined || previousKey === key) return undefined;
    return this.all.get(previousKey)?.handle;
  }

  remove(key: string): void {
    const slot = this.all.get(key);
    if (!slot) return;
    this.all.delete(key);
    this.unmarkPending(key, slot);
    if (slot.vm !== undefined && this.byVm.get(slot.vm) === key) this.byVm.delete(slot.vm);
  }

  private markPending(key: string, slot: Slot<T>): void {
    this.pending.set(key, slot);
    this.pendingBySource.set(slot.source, (this.pendingBySource.get(slot.source) ?? 0) + 1);
  }

  private unmarkPending(key: string, slot: Slot<T>): void {
    if (!this.pending.delete(key)) return;
    const left = (this.pendingBySource.get(slot.source) ?? 1) - 1;
    if (left > 0) this.pendingBySource.set(slot.source, left);
    else this.pendingBySource.delete(slot.source);
  }
}

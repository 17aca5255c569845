// What the keep-running link needs from the per-VM loop: the VM's pending
// notice and a way to give it a lease through the agent (Directive.lease_grants).
import type { VmKey } from "../model/vm-key.js";

export interface KeepContext {
  state: string;
  mode: string;
  connected: boolean;
  owner: string;
  maxKeepRunningSeconds: number;
  /** The pending stop, if there is one now. */
  notice?: { id: string; reason: string; deadlineMs: number };
}

export interface LinkGrant {
  noticeId: string;
  seconds: number;
  /** Who the link was sent to (the VM's owner), "" when unknown. */
  user: string;
  reason: string;
}

export type GrantOutcome = { ok: true; leaseId: string } | { ok: false; message: string };

export interface KeepGranter {
  keepContext(vm: VmKey, nowMs: number): KeepContext | undefined;
  /** Sends the grant to the VM's agent; the lease holds once the agent reports it. */
  grantViaLink(vm: VmKey, grant: LinkGrant, nowMs: number): GrantOutcome;
}

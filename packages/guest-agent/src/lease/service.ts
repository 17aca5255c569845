// The agent's lease service: owns the leases (in memory, in leases.json, in the
// audit log), serves the ws-lease socket, and puts leases in every Report. What
// the collector's Directives say (about the leases, the policy, pending stops)
// is handled by lease/directive-handler.ts, which this service lends its leases.
import { randomBytes } from "node:crypto";
import { mkdir } from "node:fs/promises";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Directive, type LeaseSignalSchema, errorMessage, terminalText } from "@ws/protocol";
import type { Clock } from "../clock.js";
import { NoticeDelivery } from "../notice/delivery.js";
import { WelcomeDelivery } from "../notice/welcome.js";
import { under, type Roots } from "../roots.js";
import { loadUsers, type Users } from "../users.js";
import { AuditLog } from "./audit.js";
import { DirectiveHandler } from "./directive-handler.js";
import { formatLeaseDuration } from "./format.js";
import {
  checkTake,
  isExpired,
  leaseAgeSeconds,
  leaseOnWire,
  cancelRefusal,
  MAX_REASON_LENGTH,
  mayCancel,
  newLease,
  partitionExpired,
  remainingSeconds,
  restoredLease,
  storedLease,
  type Instant,
  type LeaseRecord,
} from "./leases.js";
import { proofDirFor } from "./peer-proof.js";
import { LeaseSocketServer, type WhoIsCalling } from "./server.js";
import { loadLeaseState, saveLeaseState } from "./store.js";
import { ScheduleRequests } from "./schedule.js";
import {
  errorAnswer,
  MAX_CONFIRM_WAIT_SECONDS,
  type Answer,
  type CapSource,
  type WireLease,
  type Request,
  type StatusView,
} from "./wire.js";

export interface LeaseServiceOptions {
  stateDir: string;
  /** Default: <run>/ws-agent/agent.sock, that is /run/ws-agent/agent.sock. */
  socketPath?: string;
  clock: Clock;
  users: Users;
  roots: Roots;
  log: (line: string) => void;
  /** Default: a NoticeDelivery writing to human-owned ptys, desktops and <run>/ws-agent/notice.json. */
  notifier?: NoticeDelivery;
  /** Default: a WelcomeDelivery writing the welcome back to the first login's terminal (notice/welcome.ts). */
  welcome?: WelcomeDelivery;
  /** Leases were taken or cancelled: a good moment to send a Report instead of waiting for the next one. */
  onLeasesChanged?: () => void;
  /** How soon to try the socket again when it could not be opened (default 30 s). */
  listenRetryMs?: number;
}

export function defaultSocketPath(roots: Roots): string {
  return under(roots.run, "ws-agent", "agent.sock");
}

const LISTEN_RETRY_MS = 30_000;

export class LeaseService {
  private leases: LeaseRecord[] = [];
  private collector: { connected: boolean; address: string; sinceMonoMs: number | undefined } = {
    connected: false,
    address: "",
    sinceMonoMs: undefined,
  };
  private saving: Promise<void> = Promise.resolve();
  /** Ids in the last leases.json that was saved: what a restart would bring back. */
  private onDisk = new Set<string>();
  private readonly confirmationWaiters = new Set<() => void>();
  /** `ws-lease schedule` requests on their way to the collector (lease/schedule.ts). */
  readonly schedules = new ScheduleRequests();
  private server: LeaseSocketServer | undefined;
  private listenFailures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private users: Users;
  private readonly audit: AuditLog;
  private readonly directives: DirectiveHandler;

  private constructor(private readonly options: LeaseServiceOptions) {
    this.users = options.users;
    this.audit = AuditLog.in(options.stateDir, options.log);
    this.directives = new DirectiveHandler({
      audit: this.audit,
      log: options.log,
      notifier:
        options.notifier ??
        new NoticeDelivery({ roots: options.roots, users: options.users, clock: options.clock, log: options.log }),
      welcome:
        options.welcome ??
        new WelcomeDelivery({ roots: options.roots, users: options.users, clock: options.clock, log: options.log }),
      schedules: this.schedules,
      onLeasesChanged: options.onLeasesChanged,
    });
  }

  static async open(options: LeaseServiceOptions): Promise<LeaseService> {
    const service = new LeaseService(options);
    await mkdir(options.stateDir, { recursive: true, mode: 0o700 });
    const now = service.now();
    const state = await loadLeaseState(options.stateDir, now.wallMs, options.log);
    service.directives.capFromPolicy = state.maxKeepRunningSeconds;
    service.leases = state.leases.map((lease) => restoredLease(lease, now));
    service.onDisk = new Set(state.leases.map((lease) => lease.id));
    if (service.leases.length > 0)
      options.log(`leases: restored ${service.leases.length} lease(s) from ${options.stateDir}`);
    service.pruneExpired(now);
    await service.listen();
    return service;
  }

  /**
   * Opens the socket. If it cannot be opened (another agent holds it, a
   * directory in the way), the leases are still kept and reported, and the
   * socket is tried again every 30 s: the agent does not fail for it.
   */
  private async listen(): Promise<void> {
    const socketPath = this.options.socketPath ?? defaultSocketPath(this.options.roots);
    try {
      this.server = await LeaseSocketServer.listen({
        socketPath,
        proofDir: proofDirFor(socketPath),
        handle: (request, whoIsCalling) => this.handle(request, whoIsCalling),
        log: this.options.log,
      });
      if (this.closed) return await this.server.close();
      if (this.listenFailures > 0) this.options.log(`leases: now serving ${socketPath}`);
      this.listenFailures = 0;
    } catch (error) {
      if (this.listenFailures++ === 0) {
        this.options.log(
          `leases: cannot serve ${socketPath}: ${errorMessage(error)}; ws-lease will not work until it can (retrying every 30s)`,
        );
      }
      if (this.closed) return;
      this.retryTimer = setTimeout(() => void this.listen(), this.options.listenRetryMs ?? LISTEN_RETRY_MS);
      this.retryTimer.unref?.();
    }
  }

  /** The leases for the next Report: every one not yet expired. */
  reportLeases(): MessageInitShape<typeof LeaseSignalSchema> {
    const now = this.now();
    this.pruneExpired(now);
    return { leases: this.leases.map((lease) => leaseOnWire(lease, now)) };
  }

  /** What the collector's Directive says: handled by lease/directive-handler.ts, on these leases. */
  applyDirective(directive: Directive): void {
    this.directives.apply(directive, this.now(), {
      leases: () => this.leases,
      users: () => this.users,
      adopt: (leases) => {
        this.leases = leases;
      },
      persist: () => void this.persist(),
      decisionsArrived: () => {
        for (const wake of [...this.confirmationWaiters]) wake();
      },
    });
  }

  setCollectorConnected(connected: boolean, address: string): void {
    if (connected !== this.collector.connected || address !== this.collector.address) {
      this.collector = { connected, address, sinceMonoMs: this.options.clock.monotonicMs() };
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    await this.server?.close();
    for (const wake of [...this.confirmationWaiters]) wake();
    this.schedules.close();
    await this.directives.close();
    await this.saving;
    await this.audit.flush();
  }

  /** For the agent's own status output (ws-agent probe and tests). */
  status(): StatusView {
    const now = this.now();
    this.pruneExpired(now);
    return this.statusView(now);
  }

  private now(): Instant {
    return { wallMs: this.options.clock.nowMs(), monoMs: this.options.clock.monotonicMs() };
  }

  private cap(): { seconds: number; source: CapSource } {
    return this.directives.cap();
  }

  private pruneExpired(now: Instant): void {
    const { alive, expired } = partitionExpired(this.leases, now);
    if (expired.length === 0) return;
    this.leases = alive;
    this.audit.record(
      expired.map((lease) => ({ action: "expired", lease })),
      now.wallMs,
    );
    for (const lease of expired) this.options.log(`lease ${lease.id} of ${lease.user} expired`);
    void this.persist();
  }

  /** Saves in the background; a failure is logged and the leases stay in memory. */
  private persist(): Promise<void> {
    return this.persistOrThrow().catch((error: unknown) => {
      this.options.log(
        `leases: cannot save to ${this.options.stateDir}: ${errorMessage(error)}; leases are kept in memory`,
      );
    });
  }

  /** Saves leases.json durably (write, fsync, rename, fsync the directory); rejects if that failed. */
  private persistOrThrow(): Promise<void> {
    const run = this.saving.then(async () => {
      const now = this.now();
      const state = {
        leases: this.leases.map((lease) => storedLease(lease, now)),
        ...(this.directives.capFromPolicy !== undefined
          ? { maxKeepRunningSeconds: this.directives.capFromPolicy }
          : {}),
      };
      await saveLeaseState(this.options.stateDir, state);
      this.onDisk = new Set(state.leases.map((lease) => lease.id));
    });
    this.saving = run.catch(() => undefined);
    return run;
  }

  /** The answer for a change that could not be made durable; the log line says what failed. */
  private notSaved(what: string, error: unknown): Answer {
    const reason = diskProblem(error);
    this.options.log(`leases: ${what} refused: cannot write to ${this.options.stateDir}: ${errorMessage(error)}`);
    return errorAnswer(
      "not_saved",
      `the agent could not save the ${what}: ${reason}; nothing was changed (ask an administrator to look at ${this.options.stateDir})`,
    );
  }

  private async handle(request: Request, whoIsCalling: WhoIsCalling): Promise<Answer> {
    switch (request.op) {
      case "list": {
        const now = this.now();
        this.pruneExpired(now);
        return { ok: true, op: "list", leases: this.leases.map((lease) => leaseView(lease, now)) };
      }
      case "status":
        return { ok: true, op: "status", status: this.status() };
      case "take":
        return this.take(request, whoIsCalling);
      case "cancel":
        return this.cancel(request, whoIsCalling);
      case "schedule":
        return this.schedule(request, whoIsCalling);
    }
  }

  /** Carries a schedule request to the collector and waits for its answer (lease/schedule.ts). */
  private async schedule(request: Extract<Request, { op: "schedule" }>, whoIsCalling: WhoIsCalling): Promise<Answer> {
    const caller = await whoIsCalling();
    if (!caller.ok) return errorAnswer("unverified", `the agent could not verify which user you are: ${caller.reason}`);
    if (!this.collector.connected)
      return errorAnswer(
        "busy",
        "the collector is not connected: the schedule lives outside the VM, so nothing was changed; try again later",
      );
    const user = await this.userName(caller.uid);
    const waiting = this.schedules.ask(
      request.ask,
      user,
      () => this.options.onLeasesChanged?.(),
      MAX_CONFIRM_WAIT_SECONDS * 1000,
    );
    if (waiting === "busy") return errorAnswer("busy", "too many schedule requests at once; try again");
    const reply = await waiting;
    if (!reply)
      return errorAnswer(
        "busy",
        `the collector did not answer within ${MAX_CONFIRM_WAIT_SECONDS} s; check with ws-lease schedule status`,
      );
    if (!reply.ok) return errorAnswer("bad_request", reply.message);
    return { ok: true, op: "schedule", message: reply.message, schedule: reply.schedule };
  }

  private async take(request: Extract<Request, { op: "take" }>, whoIsCalling: WhoIsCalling): Promise<Answer> {
    const caller = await whoIsCalling();
    if (!caller.ok) return errorAnswer("unverified", `the agent could not verify which user you are: ${caller.reason}`);
    const now = this.now();
    this.pruneExpired(now);
    const cap = this.cap();
    const refusal = checkTake(request, caller.uid, cap.seconds, this.leases);
    if (refusal) {
      if (refusal.code === "over_cap") {
        return errorAnswer(
          "over_cap",
          `${formatLeaseDuration(request.seconds)} is longer than this VM's keep-running cap of ${formatLeaseDuration(cap.seconds)}`,
          { capSeconds: cap.seconds, capSource: cap.source },
        );
      }
      return errorAnswer(refusal.code, refusal.message);
    }
    const user = await this.userName(caller.uid);
    const lease = newLease(
      {
        id: this.newId(),
        uid: caller.uid,
        user,
        reason: terminalText(request.reason, MAX_REASON_LENGTH),
        requestedSeconds: request.seconds,
      },
      now,
    );
    // Confirmed only once durable: first the audit line, then leases.json. On any failure the
    // lease is refused and what was stored before is untouched (the atomic write never touches
    // leases.json until its replacement is fully on disk).
    try {
      await this.audit.append([{ action: "granted", lease }], now.wallMs);
    } catch (error) {
      return this.notSaved("lease", error);
    }
    this.leases.push(lease);
    try {
      await this.persistOrThrow();
    } catch (error) {
      // Another take's save may already have written this lease: then it is durable after all.
      if (this.onDisk.has(lease.id)) return this.granted(lease, request, user, caller.uid, cap);
      this.leases = this.leases.filter((candidate) => candidate.id !== lease.id);
      this.audit.record([{ action: "refused", lease, detail: `not saved: ${diskProblem(error)}` }], this.now().wallMs);
      return this.notSaved("lease", error);
    }
    return this.granted(lease, request, user, caller.uid, cap);
  }

  /** The lease is on disk: say so, report it, and wait a moment for the collector's answer. */
  private async granted(
    lease: LeaseRecord,
    request: Extract<Request, { op: "take" }>,
    user: string,
    uid: number,
    cap: { seconds: number; source: CapSource },
  ): Promise<Answer> {
    this.options.log(
      `lease ${lease.id} granted to ${user} (uid ${uid}) for ${formatLeaseDuration(lease.requestedSeconds)}${lease.reason ? `: ${lease.reason}` : ""}`,
    );
    this.options.onLeasesChanged?.();
    if (request.waitSeconds > 0 && this.collector.connected)
      await this.waitForConfirmation(lease.id, request.waitSeconds);
    const now = this.now();
    const current = this.leases.find((candidate) => candidate.id === lease.id) ?? lease;
    return {
      ok: true,
      op: "take",
      lease: leaseView(current, now),
      capSeconds: cap.seconds,
      capSource: cap.source,
      collectorConnected: this.collector.connected,
    };
  }

  private async cancel(request: Extract<Request, { op: "cancel" }>, whoIsCalling: WhoIsCalling): Promise<Answer> {
    const caller = await whoIsCalling();
    if (!caller.ok) return errorAnswer("unverified", `the agent could not verify which user you are: ${caller.reason}`);
    const now = this.now();
    this.pruneExpired(now);
    let chosen: LeaseRecord[];
    if ("id" in request.target) {
      const id = request.target.id;
      const lease = this.leases.find((candidate) => candidate.id === id);
      if (!lease)
        return errorAnswer(
          "not_found",
          `there is no lease ${JSON.stringify(terminalText(id, 40))} (it may have expired); see ws-lease list`,
        );
      if (!mayCancel(lease, caller.uid)) {
        return errorAnswer("forbidden", cancelRefusal(lease));
      }
      chosen = [lease];
    } else {
      chosen = this.leases.filter((lease) => mayCancel(lease, caller.uid));
    }
    if (chosen.length > 0) {
      const ids = new Set(chosen.map((lease) => lease.id));
      const before = this.leases;
      this.leases = this.leases.filter((lease) => !ids.has(lease.id));
      const byUser = caller.uid === 0 ? "root" : await this.userName(caller.uid);
      // A cancel that is not on disk would come back after a restart: it is refused the same way.
      try {
        await this.persistOrThrow();
      } catch (error) {
        this.leases = before;
        return this.notSaved("cancellation", error);
      }
      this.audit.record(
        chosen.map((lease) =>
          lease.uid === caller.uid
            ? { action: "cancelled", lease }
            : { action: "cancelled", lease, byUid: caller.uid, byUser },
        ),
        now.wallMs,
      );
      for (const lease of chosen)
        this.options.log(`lease ${lease.id} of ${lease.user} cancelled by ${byUser} (uid ${caller.uid})`);
      this.options.onLeasesChanged?.();
    }
    return { ok: true, op: "cancel", cancelled: chosen.map((lease) => leaseView(lease, now)) };
  }

  private waitForConfirmation(id: string, seconds: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        const lease = this.leases.find((candidate) => candidate.id === id);
        if (lease && !lease.confirmed && !timedOut && !this.closed) return;
        clearTimeout(timer);
        this.confirmationWaiters.delete(done);
        resolve();
      };
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        done();
      }, seconds * 1000);
      timer.unref?.();
      this.confirmationWaiters.add(done);
    });
  }

  private async userName(uid: number): Promise<string> {
    const known = this.users.byUid(uid);
    if (known) return known.name;
    // An account created after the agent started: read passwd again once.
    this.users = await loadUsers(this.options.roots);
    return this.users.byUid(uid)?.name ?? `uid ${uid}`;
  }

  private newId(): string {
    for (;;) {
      const id = randomBytes(4).toString("hex");
      if (!this.leases.some((lease) => lease.id === id)) return id;
    }
  }

  private statusView(now: Instant): StatusView {
    const cap = this.cap();
    const view: StatusView = {
      now: new Date(now.wallMs).toISOString(),
      collector: {
        connected: this.collector.connected,
        address: this.collector.address,
        ...(this.collector.sinceMonoMs !== undefined
          ? { sinceSeconds: (now.monoMs - this.collector.sinceMonoMs) / 1000 }
          : {}),
      },
      capSeconds: cap.seconds,
      capSource: cap.source,
      leases: this.leases.map((lease) => leaseView(lease, now)),
    };
    this.directives.addToStatus(view, now);
    return view;
  }
}

export function leaseView(lease: LeaseRecord, now: Instant): WireLease {
  const age = leaseAgeSeconds(lease, now);
  const remaining = isExpired(lease, now) ? 0 : remainingSeconds(lease, now);
  const view: WireLease = {
    id: lease.id,
    uid: lease.uid,
    user: lease.user,
    reason: lease.reason,
    requestedSeconds: lease.requestedSeconds,
    holdSeconds: lease.holdSeconds,
    ageSeconds: age,
    remainingSeconds: remaining,
    takenAt: new Date(now.wallMs - age * 1000).toISOString(),
    expiresAt: new Date(now.wallMs + remaining * 1000).toISOString(),
    confirmed: lease.confirmed,
    clamped: lease.clamped,
    refused: lease.refused,
  };
  if (lease.maxKeepRunningSeconds !== undefined) view.maxKeepRunningSeconds = lease.maxKeepRunningSeconds;
  if (lease.collectorMessage !== undefined) view.message = lease.collectorMessage;
  if (lease.via !== undefined) view.via = lease.via;
  return view;
}

/** What a failed write means, in the words a user can act on. */
export function diskProblem(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case "ENOSPC":
      return "the disk is full";
    case "EDQUOT":
      return "the disk quota is exhausted";
    case "EROFS":
      return "the disk is read-only";
    case "EIO":
      return "the disk reported an I/O error";
    case "EACCES":
    case "EPERM":
      return "the agent may not write its state directory";
    default:
      return code
        ? `the write failed (${code})`
        : `the write failed (${(error as Error | undefined)?.message ?? String(error)})`;
  }
}

// The loop edge that makes learned warm starts (docs/policy.md "Warm starts learned from
// returns"), modelled on the schedule's runner: every pass the leader reads each VM's returns and
// warm starts (annotations), its policy and its owner's zone, asks the pure plan (plan.ts) and
// carries out the answer. A warm start is written on the VM before it is asked for (a collector
// restart never fires a second one the same day) and goes through the same start path as the
// start link and the schedule (StartLinks.start: one start per VM, a `Started` Event), trigger
// `warm`. While it waits for its person the engine runs the VM under the warm window as its
// idle-timeout (starts.ts warmWaitingPolicy): nobody coming means the usual notice, grace and
// stop. Each settled warm start is counted, used or wasted.
import { Counter, type Registry } from "prom-client";
import type { Policy } from "../../engine/types.js";
import { type VmKey, vmId } from "../../model/vm-key.js";
import type { AuthorizedStart } from "../start/handler.js";
import type { StartFacts, StartPlatform } from "../start/platform.js";
import { runViewOf } from "../start/tracker.js";
import { defaultZoneOf, type ProfileSchedules, scheduleOf } from "../schedule/schedules.js";
import {
  noteShortages,
  planWarmStart,
  resourceShort,
  type Shortages,
  type WarmPlan,
  type WarmStatus,
  type WarmVmInput,
  warmStatusOf,
} from "./plan.js";
import { parseReturns, RETURNS_ANNOTATION } from "./returns.js";
import { DEFAULT_WARM_LIMITS, type LocalTime, localTimeIn, type WarmLimits } from "./rule.js";
import {
  encodeWarmStarts,
  parseWarmStarts,
  WARM_START_ANNOTATION,
  WARM_STARTS_ANNOTATION,
  waitingWarmStart,
} from "./starts.js";

/** Local times remembered per zone (a few returns of every opted-in VM). */
const MAX_REMEMBERED = 100_000;

export type WarmOutcomeCounts = Record<"used" | "wasted", number>;

export interface WarmRunnerOptions {
  platform: StartPlatform;
  start: (request: AuthorizedStart) => Promise<{ ok: boolean; message: string }>;
  prefix: string;
  /** The zone of a VM with neither a `time-zone` annotation nor a schedule naming one. */
  siteZone: string;
  profileSchedules?: ProfileSchedules;
  /** The VM's policy as its labels and annotations resolve now, and whether they had errors. */
  policyOf: (vm: VmKey) => { policy: Policy; errors: boolean };
  /** The last human evidence the engine has of the VM (its loop record's; the boot's first Report starts it), if any. */
  lastHumanAtMs: (vm: VmKey) => number | undefined;
  nowMs: () => number;
  leader: () => boolean;
  limits?: WarmLimits;
  /** The audit trail (Kubernetes Events): a warm start settled, or one that could not be made. */
  audit: (
    vm: VmKey,
    type: "Normal" | "Warning",
    reason: "WarmStartUsed" | "WarmStartWasted" | "WarmStartFailed",
    message: string,
  ) => void;
  /** A person came to a warm-started VM without asking (its first activity): a return with no wait. */
  foundWarm?: (vm: VmKey, atMs: number) => void;
  log: (level: "info" | "warn", message: string) => void;
}

export class WarmRunner {
  /** Settled warm starts since this collector started, by outcome (workstation_warm_starts_total). */
  readonly counts: WarmOutcomeCounts = { used: 0, wasted: 0 };
  private readonly shortages: Shortages = new Map();
  private readonly zones = new Map<string, (ms: number) => LocalTime>();
  /**
   * Per VM with a waiting warm start: the first last-human time the engine had for its new boot.
   * The engine starts that clock at the boot's first Report (a full idle-timeout for a VM that
   * just became Active), so only a later one is a person.
   */
  private readonly humanBaselines = new Map<string, { warmAtMs: number; atMs: number }>();
  private running = false;
  /** VMs whose warm start waits for its person, as of the last pass: when it was made. */
  private readonly waiting = new Map<string, number>();

  constructor(private readonly options: WarmRunnerOptions) {}

  /** One pass over the VMs. Never rejects. */
  async pass(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.passOnce();
    } catch (error) {
      this.options.log("warn", `warm-start pass: ${String(error)}`);
    } finally {
      this.running = false;
    }
  }

  private async passOnce(): Promise<void> {
    if (!this.options.leader()) return;
    const now = this.options.nowMs();
    const { platform } = this.options;
    const all = platform.list().map((vm) => ({ vm, facts: platform.facts(vm) }));
    noteShortages(
      this.shortages,
      all.filter(({ facts }) => facts?.instance?.unschedulable).map(({ facts }) => ({ needs: facts?.needs ?? [] })),
      now,
    );
    for (const { vm, facts } of all) {
      if (!facts) continue;
      const plan = planWarmStart(this.inputOf(vm, facts, now, true));
      await this.carryOut(vm, facts, plan);
      // What is on the VM now: the plan wrote a new record, else the one read.
      const record = plan.kind === "none" ? facts : this.options.platform.facts(vm);
      const waiting = waitingWarmStart(
        parseWarmStarts(record?.annotations[`${this.options.prefix}${WARM_STARTS_ANNOTATION}`]),
      );
      if (waiting) this.waiting.set(vmId(vm), waiting.atMs);
      else this.waiting.delete(vmId(vm));
    }
    const ids = new Set(all.map(({ vm }) => vmId(vm)));
    for (const id of this.humanBaselines.keys()) if (!ids.has(id)) this.humanBaselines.delete(id);
    for (const id of this.waiting.keys()) if (!ids.has(id)) this.waiting.delete(id);
  }

  /**
   * When the VM's warm start that still waits for its person was made, as of the last pass; else
   * undefined. The loop reads it for every Report: while it waits, the collector hears every sample
   * (a person's first keystroke settles it at once) and the VM runs under its warm window.
   */
  waitingSince(vm: VmKey): number | undefined {
    return this.waiting.get(vmId(vm));
  }

  /**
   * What the VM page and /api/vms say of the VM's warm starts now (undefined: nothing to say). It
   * reads what a pass reads but moves nothing: no baseline of a person's activity is taken.
   */
  status(vm: VmKey): WarmStatus | undefined {
    const facts = this.options.platform.facts(vm);
    if (!facts) return undefined;
    const input = this.inputOf(vm, facts, this.options.nowMs(), false);
    return warmStatusOf(input, planWarmStart(input));
  }

  /**
   * The pure plan's input for one VM, from what the platform and the engine know of it. `pass`:
   * a pass of the runner, which notes the warm boot's first human baseline (personSince).
   */
  private inputOf(vm: VmKey, facts: StartFacts, now: number, pass: boolean): WarmVmInput {
    const { prefix } = this.options;
    const annotations = facts.annotations;
    const { policy, errors } = this.options.policyOf(vm);
    const ownerSays = annotations[`${prefix}${WARM_START_ANNOTATION}`]?.trim().toLowerCase();
    const starts = parseWarmStarts(annotations[`${prefix}${WARM_STARTS_ANNOTATION}`]);
    const lastHumanAtMs = pass
      ? this.personSince(vmId(vm), waitingWarmStart(starts)?.atMs, this.options.lastHumanAtMs(vm))
      : undefined;
    return {
      nowMs: now,
      policy,
      policyErrors: errors,
      ownerOff: ownerSays === "off" || ownerSays === "false",
      running: runViewOf(facts).running,
      ...(facts.lastStop ? { lastStopAtMs: facts.lastStop.atMs } : {}),
      ...(lastHumanAtMs !== undefined ? { lastHumanAtMs } : {}),
      returns: parseReturns(annotations[`${prefix}${RETURNS_ANNOTATION}`]),
      starts,
      local: this.localIn(this.zoneOf(annotations)),
      resourceShort: resourceShort(this.shortages, facts.needs ?? [], now),
      limits: this.options.limits ?? DEFAULT_WARM_LIMITS,
    };
  }

  /** A person's evidence on the warm-started boot: a last-human time later than the boot's first one; else undefined. */
  private personSince(id: string, warmAtMs: number | undefined, lastHumanAtMs: number | undefined): number | undefined {
    if (warmAtMs === undefined) {
      this.humanBaselines.delete(id);
      return undefined;
    }
    // Before the new boot's first Report the record still holds the old boot's clocks.
    if (lastHumanAtMs === undefined || lastHumanAtMs < warmAtMs) return undefined;
    const baseline = this.humanBaselines.get(id);
    if (baseline?.warmAtMs !== warmAtMs) {
      this.humanBaselines.set(id, { warmAtMs, atMs: lastHumanAtMs });
      return undefined;
    }
    return lastHumanAtMs > baseline.atMs ? lastHumanAtMs : undefined;
  }

  /** The owner's zone: the schedule's own (`tz …`), else the VM's `time-zone`, else the site's. */
  private zoneOf(annotations: Record<string, string>): string {
    const { prefix, siteZone, profileSchedules } = this.options;
    return (
      scheduleOf(annotations, prefix, siteZone, profileSchedules)?.schedule?.timeZone ??
      defaultZoneOf(annotations, prefix, siteZone)
    );
  }

  /**
   * The wall clock in `zone`, remembered per instant: the same returns are read every pass, and
   * Intl's formatting is what the rule spends its time on. Bounded: forgotten past MAX_REMEMBERED.
   */
  private localIn(zone: string): (ms: number) => LocalTime {
    let local = this.zones.get(zone);
    if (!local) {
      const format = localTimeIn(zone);
      const memo = new Map<number, LocalTime>();
      local = (ms) => {
        let known = memo.get(ms);
        if (!known) {
          if (memo.size >= MAX_REMEMBERED) memo.clear();
          known = format(ms);
          memo.set(ms, known);
        }
        return known;
      };
      this.zones.set(zone, local);
    }
    return local;
  }

  private async carryOut(vm: VmKey, facts: StartFacts, plan: WarmPlan): Promise<void> {
    if (plan.kind === "none") return;
    const id = vmId(vm);
    const before = facts.annotations[`${this.options.prefix}${WARM_STARTS_ANNOTATION}`] ?? null;
    const written = await this.write(vm, encodeWarmStarts(plan.starts));
    if (!written.ok) {
      this.options.log("warn", `${id}: the warm start's record could not be written: ${written.message}`);
      return;
    }
    if (plan.kind === "settle") {
      this.counts[plan.outcome]++;
      if (plan.outcome === "used") {
        if (plan.unrecordedReturnAtMs !== undefined) this.keepReturn(vm, plan.unrecordedReturnAtMs);
        this.options.audit(
          vm,
          "Normal",
          "WarmStartUsed",
          "the learned warm start was used: a person came while it ran",
        );
      } else
        this.options.audit(
          vm,
          "Normal",
          "WarmStartWasted",
          "the learned warm start was not used: nobody came within its window and it was stopped again",
        );
      return;
    }
    let result: { ok: boolean; message: string };
    try {
      result = await this.options.start({ vm, by: `a learned warm start (${plan.reason})`, trigger: "warm" });
    } catch (error) {
      result = { ok: false, message: String(error) };
    }
    if (result.ok) return;
    // Not made: the record goes back to what it was, so a later pass may try again before the arrival.
    await this.write(vm, before);
    this.options.audit(vm, "Warning", "WarmStartFailed", `the learned warm start could not be made: ${result.message}`);
  }

  /** The person who came to the warm VM without asking: their return (no wait) kept on the VM and in the histograms. */
  private keepReturn(vm: VmKey, atMs: number): void {
    this.options.foundWarm?.(vm, atMs);
    const write = this.options.platform.recordReturn;
    if (!write) return;
    void write
      .call(this.options.platform, vm, { atMs, trigger: "warm", waitSeconds: 0 }, this.options.nowMs())
      .then((problem) => {
        if (problem) this.options.log("warn", `${vmId(vm)}: the return could not be recorded: ${problem}`);
      });
  }

  private async write(vm: VmKey, value: string | null): Promise<{ ok: boolean; message: string }> {
    const write = this.options.platform.writeAnnotations;
    if (!write) return { ok: false, message: "the platform keeps no annotations" };
    return write.call(this.options.platform, vm, { [WARM_STARTS_ANNOTATION]: value || null });
  }
}

/** `workstation_warm_starts_total{outcome}`: fleet-level, both outcomes from 0. */
export function registerWarmMetrics(registry: Registry, counts: () => WarmOutcomeCounts): void {
  new Counter({
    name: "workstation_warm_starts_total",
    help: "Learned warm starts settled, by outcome: used (a person came while it ran) or wasted (nobody came within its window and it was stopped again).",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      this.reset();
      const now = counts();
      for (const outcome of ["used", "wasted"] as const) this.inc({ outcome }, now[outcome]);
    },
  });
}

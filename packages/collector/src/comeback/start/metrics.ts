// Start metrics, built at scrape time from the tracker: how many starts each path asked for, and
// how long each took from the request to ready (the entry service answering).
import { Counter, Histogram, type Registry } from "prom-client";
import { WAIT_STAGES, WAIT_TRIGGERS } from "../wait/stages.js";
import { START_TRIGGERS, type StartTracker } from "./tracker.js";

/** From seconds (a warm node) to a quarter of an hour (a GPU that had to be freed). */
export const START_TO_READY_BUCKETS = [5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900];

/** A stage can take under a second (a VM found ready, the agent's first Report): finer at the low end. */
export const RETURN_WAIT_BUCKETS = [0.5, 1, 2, ...START_TO_READY_BUCKETS];

export function registerStartMetrics(
  registry: Registry,
  tracker: StartTracker,
  /** Disputes so far by the profile of the disputed VM ("" for the defaults; bounded by the configured profiles). */
  disputes: () => ReadonlyMap<string, number> = () => new Map(),
): void {
  new Counter({
    name: "workstation_stop_disputes_total",
    help: 'Stops their user reported as a mistake ("I was working") from the starting page, by the VM\'s policy profile (empty: the defaults): false stops to explain and tune thresholds with.',
    labelNames: ["profile"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [profile, count] of disputes()) this.inc({ profile }, count);
    },
  });
  new Counter({
    name: "workstation_starts_total",
    help: "Starts asked of the platform by trigger: link (the start link's button), address (the workstation's own address), ssh (the ssh helper), schedule (the VM's start schedule), warm (a learned warm start). Two requests that share one start count once.",
    labelNames: ["trigger"],
    registers: [registry],
    collect() {
      this.reset();
      for (const trigger of START_TRIGGERS) this.inc({ trigger }, tracker.startsTotal.get(trigger) ?? 0);
    },
  });
  new Histogram({
    name: "workstation_start_to_ready_seconds",
    help: "Seconds from a start request to the first Report with the entry service up (sshd listening, Jupyter answering).",
    buckets: START_TO_READY_BUCKETS,
    registers: [registry],
    collect() {
      for (const seconds of tracker.drainReadySeconds()) this.observe(seconds);
    },
  });
  const waits = new Histogram({
    name: "workstation_return_wait_seconds",
    help: "A person's wait from asking for a stopped VM to its entry service up, by trigger (link, wake, ssh, schedule, warm, standalone) and stage (placement: waiting for a node/GPU; boot: scheduled to running; guest: running to the agent connected; report: to the Report with the entry service up; total). A return that found the VM ready counts 0.",
    labelNames: ["trigger", "stage"],
    buckets: RETURN_WAIT_BUCKETS,
    registers: [registry],
    collect() {
      for (const { trigger, split } of tracker.drainWaits())
        for (const stage of WAIT_STAGES) this.observe({ trigger, stage }, split[stage]);
    },
  });
  // Every trigger and stage from 0 on, so a dashboard's rate() has a series before the first return.
  for (const trigger of WAIT_TRIGGERS) for (const stage of WAIT_STAGES) waits.zero({ trigger, stage });
}

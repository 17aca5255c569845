// The cap on agent connections: read from the process's open-file limit (the /proc/self/limits
// of a Node process on the development machine, Debian 12 with a 6.18 kernel, whose nofile is 20,000),
// overridden by grpc.maxConnections, and the start-up warnings that say when it cannot hold the
// fleet and what to do.
import { describe, expect, it } from "vitest";
import {
  agentConnectionCap,
  connectionCapWarnings,
  describeConnectionCap,
  OPEN_FILE_RESERVE,
  parseOpenFileLimit,
} from "../../src/agents/connection-cap.js";

/** Captured with `node -e 'process.stdout.write(fs.readFileSync("/proc/self/limits", "utf8"))'` (soft raised to hard at start). */
const LIMITS = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             96363                96363                processes 
Max open files            20000                20000                files     
Max locked memory         8388608              8388608              bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       96363                96363                signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
`;

describe("the open-file limit", () => {
  it("is the soft Max open files of /proc/self/limits", () => {
    expect(parseOpenFileLimit(LIMITS)).toBe(20_000);
    expect(parseOpenFileLimit(LIMITS.replace("20000                20000", "1024                 1048576"))).toBe(1024);
  });

  it("is Infinity when unlimited and unknown when the line is missing or garbled", () => {
    expect(parseOpenFileLimit(LIMITS.replace("20000                20000", "unlimited            unlimited"))).toBe(
      Number.POSITIVE_INFINITY,
    );
    expect(parseOpenFileLimit(LIMITS.replace(/^Max open files.*$/m, ""))).toBeUndefined();
    expect(parseOpenFileLimit("Max open files            lots")).toBeUndefined();
    expect(parseOpenFileLimit("")).toBeUndefined();
  });
});

describe("the cap on agent connections", () => {
  it("is the open-file limit less 1,024 kept for the rest of the collector", () => {
    expect(agentConnectionCap(20_000, undefined)).toEqual({
      limit: 20_000 - OPEN_FILE_RESERVE,
      source: "open-file limit",
      openFileLimit: 20_000,
      reserve: 1024,
    });
    expect(agentConnectionCap(1_048_576, undefined).limit).toBe(1_047_552);
  });

  it("keeps half of a limit under 2,048 instead", () => {
    expect(agentConnectionCap(600, undefined)).toMatchObject({ limit: 300, reserve: 300 });
    expect(agentConnectionCap(2_048, undefined)).toMatchObject({ limit: 1_024, reserve: 1_024 });
    expect(agentConnectionCap(1, undefined).limit).toBe(1);
  });

  it("is grpc.maxConnections when set, whatever the limit", () => {
    expect(agentConnectionCap(20_000, 500)).toEqual({
      limit: 500,
      source: "grpc.maxConnections",
      openFileLimit: 20_000,
      reserve: 1024,
    });
    expect(agentConnectionCap(undefined, 500)).toMatchObject({ limit: 500, reserve: 0 });
  });

  it("is none when the limit is unknown or unlimited", () => {
    expect(agentConnectionCap(undefined, undefined)).toMatchObject({ limit: undefined, source: "none" });
    expect(agentConnectionCap(Number.POSITIVE_INFINITY, undefined)).toMatchObject({ limit: undefined, reserve: 0 });
  });

  it("is said in words for the start-up line", () => {
    expect(describeConnectionCap(agentConnectionCap(20_000, undefined))).toBe(
      "18976 (open-file limit 20000 less 1024)",
    );
    expect(describeConnectionCap(agentConnectionCap(20_000, 500))).toBe("500 (grpc.maxConnections)");
    expect(describeConnectionCap(agentConnectionCap(undefined, undefined))).toBe("no cap (open-file limit unknown)");
    expect(describeConnectionCap(agentConnectionCap(Number.POSITIVE_INFINITY, undefined))).toBe(
      "no cap (open-file limit unlimited)",
    );
  });
});

describe("the start-up warnings", () => {
  it("say nothing when the cap holds the fleet", () => {
    expect(connectionCapWarnings(agentConnectionCap(20_000, undefined), 18_976)).toEqual([]);
    expect(connectionCapWarnings(agentConnectionCap(20_000, 5_000), 5_000)).toEqual([]);
    expect(connectionCapWarnings(agentConnectionCap(undefined, undefined), 50_000)).toEqual([]);
  });

  it("give the numbers and the nofile to set when the open-file limit cannot hold the fleet", () => {
    expect(connectionCapWarnings(agentConnectionCap(20_000, undefined), 20_000)).toEqual([
      "the open-file limit (20000) holds 18976 agent connections (1024 kept for the rest of the collector), fewer than the 20000 VMs it serves: agents past 18976 are refused right after they connect and retry with backoff (workstation_agent_connections_refused_total); raise the container's open-file limit (nofile: the container runtime's default ulimits, e.g. LimitNOFILE= in containerd's or CRI-O's systemd unit; docs/install.md, Sizing) to at least 21024",
    ]);
  });

  it("say to raise grpc.maxConnections, and nofile too when the limit is also short", () => {
    const [setting] = connectionCapWarnings(agentConnectionCap(20_000, 3_000), 5_000);
    expect(setting).toBe(
      "grpc.maxConnections (3000) is below the 5000 VMs this collector serves: agents past 3000 are refused right after they connect and retry with backoff (workstation_agent_connections_refused_total); raise grpc.maxConnections to at least 5000",
    );
    const [both] = connectionCapWarnings(agentConnectionCap(4_096, 3_000), 5_000);
    expect(both).toMatch(
      /raise grpc\.maxConnections to at least 5000 and raise the container's open-file limit .* to at least 6024$/,
    );
  });

  it("warn when grpc.maxConnections eats into the reserve of the open-file limit", () => {
    const warnings = connectionCapWarnings(agentConnectionCap(20_000, 19_500), 100);
    expect(warnings).toEqual([
      "grpc.maxConnections (19500) leaves fewer than 1024 of the open-file limit (20000) for the API server, the Lease renewals, scrapes and files: with that many agents connected they fail with EMFILE and the leader can lose its Lease; lower grpc.maxConnections to 18976 or raise the container's open-file limit (nofile: the container runtime's default ulimits, e.g. LimitNOFILE= in containerd's or CRI-O's systemd unit; docs/install.md, Sizing) to at least 20524",
    ]);
    // Both at once: over the reserve and short of the fleet.
    expect(connectionCapWarnings(agentConnectionCap(20_000, 19_500), 25_000)).toHaveLength(2);
  });
});

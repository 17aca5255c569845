/**
 * What the signals that look into homes (Jupyter, code-server) share within a sample and between
 * samples: the list of homes, made once per sample whichever signal asks first, and the cache of
 * walks below them (fs/user-path-cache.ts), so an idle home costs a few lstat calls, not a walk
 * per signal.
 */
import type { Clock } from "../clock.js";
import { UserPathCache } from "../fs/user-path-cache.js";
import type { Roots } from "../roots.js";
import type { Users } from "../users.js";
import { type HomeListing, listHomeDirs } from "./jupyter-homes.js";

/** One sample's view: its homes, the shared cache, and the sample's time (for the cache's racy check). */
export interface HomeSample {
  homes: HomeListing;
  cache: UserPathCache;
  nowMs: number;
}

export interface HomeScan {
  /**
   * This sample's homes. A sample is named by its clock and the time it reads (the sampler gives
   * every signal of one sample the same clock, stopped at the sample's instant), its roots and its
   * passwd table: a signal asking with any of them different starts a new sample.
   */
  sample(ctx: { roots: Roots; users: Users; clock: Clock }): Promise<HomeSample>;
  readonly cache: UserPathCache;
}

export function createHomeScan(): HomeScan {
  const cache = new UserPathCache();
  let current: { clock: Clock; nowMs: number; roots: Roots; users: Users; listed: Promise<HomeListing> } | undefined;
  return {
    cache,
    async sample(ctx) {
      const nowMs = ctx.clock.nowMs();
      if (
        current?.clock !== ctx.clock ||
        current.nowMs !== nowMs ||
        current.roots !== ctx.roots ||
        current.users !== ctx.users
      ) {
        cache.beginSample();
        current = {
          clock: ctx.clock,
          nowMs,
          roots: ctx.roots,
          users: ctx.users,
          listed: listHomeDirs(ctx.roots, ctx.users),
        };
      }
      const { homes, problems } = await current.listed;
      // Each signal gets its own problems list to add to.
      return { homes: { homes, problems: [...problems] }, cache, nowMs };
    },
  };
}

/**
 * The daemon's typed calls for the session frames of
 * `protocol/splitfs_session.ts`, over a running split-filesystem service
 * (`protocol/splitfs_client.ts`). Each method sends one request and returns
 * its reply; an error reply throws `SplitfsError` with the service's message.
 *
 * @module
 */

import type { SplitfsService } from "./splitfs_client.ts";
import type {
  CompactedReply,
  LayerCheckedReply,
  OpCapturedReply,
  OpPreparedReply,
  OpSealedReply,
  SessionOpenedReply,
  ViewMountedReply,
} from "./splitfs_session.ts";

/** A project's session in the service: its root (absolute, canonical) and name. */
export interface SessionAt {
  readonly root: string;
  readonly name: string;
}

/** The session frames as calls. */
export class SessionFs {
  constructor(readonly service: Pick<SplitfsService, "request">) {}

  /** `session-open`: snapshot, pin and mount the view of a new session. */
  open(
    at: SessionAt,
    withIgnored: boolean,
    env?: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string },
  ): Promise<SessionOpenedReply> {
    return this.service.request<SessionOpenedReply>({
      v: 1,
      t: "session-open",
      root: at.root,
      name: at.name,
      withIgnored,
      ...(env === undefined ? {} : { env }),
    });
  }

  /**
   * `view-mount`: (re)mount the view on `layers` (bottom first); `create`:
   * a forked session's first mount, which makes its directory.
   */
  mountView(
    at: SessionAt,
    layers: readonly string[],
    create = false,
  ): Promise<ViewMountedReply> {
    return this.service.request<ViewMountedReply>({
      v: 1,
      t: "view-mount",
      root: at.root,
      name: at.name,
      layers,
      ...(create ? { create } : {}),
    });
  }

  /** `op-prepare`: the op's private read-write overlay over the head's `layers`. */
  prepareOp(at: SessionAt, op: string, layers: readonly string[]): Promise<OpPreparedReply> {
    return this.service.request<OpPreparedReply>({
      v: 1,
      t: "op-prepare",
      root: at.root,
      name: at.name,
      op,
      layers,
    });
  }

  /** `op-capture`: the drained op's changed set against the head (`layers`, `rootId`). */
  captureOp(
    at: SessionAt,
    op: string,
    head: { readonly layers: readonly string[]; readonly rootId: string },
  ): Promise<OpCapturedReply> {
    return this.service.request<OpCapturedReply>({
      v: 1,
      t: "op-capture",
      root: at.root,
      name: at.name,
      op,
      layers: head.layers,
      rootId: head.rootId,
    });
  }

  /** `op-seal`: seal the captured layer on the head's `layers`; returns the new stack. */
  async sealOp(
    at: SessionAt,
    op: string,
    sealed: { readonly layer: string; readonly rootId: string; readonly layers: readonly string[] },
  ): Promise<readonly string[]> {
    const r = await this.service.request<OpSealedReply>({
      v: 1,
      t: "op-seal",
      root: at.root,
      name: at.name,
      op,
      layer: sealed.layer,
      rootId: sealed.rootId,
      layers: sealed.layers,
    });
    return r.layers;
  }

  /** `op-drop`: unmount and remove the op's directory. */
  async dropOp(at: SessionAt, op: string): Promise<void> {
    await this.service.request({ v: 1, t: "op-drop", root: at.root, name: at.name, op });
  }

  /** `layer-check`: read layer `layer` back by id and the root id it should hold. */
  checkLayer(root: string, layer: string, rootId: string): Promise<LayerCheckedReply> {
    return this.service.request<LayerCheckedReply>({
      v: 1,
      t: "layer-check",
      root,
      layer,
      rootId,
    });
  }

  /** `compact`: one step of the compaction of `layers` (into `layer`, from the second step on). */
  compact(
    at: SessionAt,
    layers: readonly string[],
    layer?: string,
    budgetMs?: number,
  ): Promise<CompactedReply> {
    return this.service.request<CompactedReply>({
      v: 1,
      t: "compact",
      root: at.root,
      name: at.name,
      layers,
      ...(layer === undefined ? {} : { layer }),
      ...(budgetMs === undefined ? {} : { budgetMs }),
    });
  }

  /** `compact-drop`: unpin the compaction into `layer` (the journal names it, or it was given up). */
  async dropCompaction(at: SessionAt, layer: string): Promise<void> {
    await this.service.request({ v: 1, t: "compact-drop", root: at.root, name: at.name, layer });
  }

  /** `session-close`: unmount the view and remove the session's directory. */
  async close(at: SessionAt): Promise<void> {
    await this.service.request({ v: 1, t: "session-close", root: at.root, name: at.name });
  }
}

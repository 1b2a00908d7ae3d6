/**
 * `marsh kit build NAME --from-host`: a Kit image made without any
 * registry. The root filesystem is assembled from host files
 * (`rootfs.ts`), written as a deterministic tar (`tar.ts`) and imported
 * into the engine as `marsh-kit/<NAME>:<first 12 hex of the tar's
 * sha256>`. The same inputs on the same host give the same bytes, so the
 * same tag: when the engine has that tag already, nothing is imported.
 * Either way the image is also tagged `marsh-kit/<NAME>:latest`, so
 * `marsh kits add KIT --image NAME` finds it by the name it was built as.
 *
 * Needs what `assembleRootfs` and `DockerApi` need.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { DockerApi, ImageInfo } from "./docker_api.ts";
import { assembleRootfs, type FileCopy, IMAGE_PATH } from "./rootfs.ts";
import { writeTar } from "./tar.ts";
import { KIT_NAME_RULE, kitNameProblem } from "../model/kit_name.ts";

/** Where Kit images live in the engine: `marsh-kit/<NAME>`. */
export const KIT_REPOSITORY_PREFIX = "marsh-kit/";
/** Labels every Kit image carries. */
export const KIT_LABEL = "marsh.kit";
/** `sha256:<hex>` of the imported tar, so a tag is only trusted when its content matches. */
export const ROOTFS_LABEL = "marsh.kit.rootfs";

/** A request that cannot be built as given; the message says what to change. */
export class KitBuildError extends Error {
  override name = "KitBuildError";
}

/** @throws {KitBuildError} when `name` breaks the Kit-name rule (`model/kit_name.ts`) */
export function checkKitName(name: string): void {
  const problem = kitNameProblem(name);
  if (problem !== null) throw new KitBuildError(problem);
}

/** The tag of Kit `name` whose root filesystem tar has sha256 `hex`. */
export function kitTag(name: string, hex: string): { repo: string; tag: string; ref: string } {
  const repo = `${KIT_REPOSITORY_PREFIX}${name}`;
  const tag = hex.slice(0, 12);
  return { repo, tag, ref: `${repo}:${tag}` };
}

/**
 * `marsh-kit/<NAME>:latest`: the tag every build of Kit `name` also gets,
 * so `marsh kits add --image NAME` finds the last build by its name.
 */
export function kitLatest(name: string): string {
  return `${KIT_REPOSITORY_PREFIX}${name}:latest`;
}

/**
 * The references `marsh kits add --image IMAGE` looks for, in order:
 * IMAGE itself, and for a bare Kit name (`probe-img`) also the last Kit
 * build of that name, {@linkcode kitLatest}.
 */
export function imageCandidates(image: string): string[] {
  return KIT_NAME_RULE.test(image) ? [image, kitLatest(image)] : [image];
}

/**
 * Finds `--image IMAGE` in the engine: IMAGE itself, or for a bare Kit
 * name the last Kit build of that name ({@linkcode imageCandidates}).
 *
 * @returns the reference found and its image, or null when neither exists
 * @throws {KitBuildError} when IMAGE and the Kit build are two different
 *   images (the message says to name one in full)
 */
export async function findKitImage(
  api: Pick<DockerApi, "inspectImage">,
  image: string,
): Promise<{ ref: string; info: ImageInfo } | null> {
  const found: { ref: string; info: ImageInfo }[] = [];
  for (const ref of imageCandidates(image)) {
    const info = await api.inspectImage(ref);
    if (info) found.push({ ref, info });
  }
  const [first, second] = found;
  if (first && second && first.info.id !== second.info.id) {
    throw new KitBuildError(
      `--image ${JSON.stringify(image)} names two images: ${image}:latest and the Kit build ` +
        `${second.ref}; give one in full (--image ${second.ref}, or --image ${image}:latest)`,
    );
  }
  return first ?? null;
}

/** What to build. */
export interface KitBuildRequest {
  readonly name: string;
  /** `--bin` values: names on `path`, or paths. */
  readonly bins: readonly string[];
  readonly files: readonly FileCopy[];
  /** The host `deno` whose libraries the image carries. */
  readonly deno: string;
  readonly path: string;
  readonly cwd: string;
  readonly onProgress?: (line: string) => void;
}

/** What was built, or found. */
export interface KitBuildResult {
  /** `sha256:…`, the engine's image id. */
  readonly id: string;
  /** `marsh-kit/<NAME>:<12 hex>` */
  readonly ref: string;
  /** `marsh-kit/<NAME>:latest`, now on this image too. */
  readonly latest: string;
  /** `sha256:<hex>` of the root filesystem tar. */
  readonly rootfs: string;
  readonly bytes: number;
  /** False when the engine had the tag already and nothing was imported. */
  readonly built: boolean;
}

/**
 * Assembles, hashes and (unless the tag exists with the same content)
 * imports Kit `name`.
 *
 * @throws {KitBuildError} on a bad name; {@linkcode RootfsError} on
 *   missing or clashing inputs; the engine's errors from `DockerApi`
 */
export async function buildKit(api: DockerApi, req: KitBuildRequest): Promise<KitBuildResult> {
  checkKitName(req.name);
  req.onProgress?.("assembling the root filesystem from host files");
  const entries = await assembleRootfs(req);
  const tar = writeTar(entries);
  const hex = createHash("sha256").update(tar).digest("hex");
  const rootfs = `sha256:${hex}`;
  const { repo, tag, ref } = kitTag(req.name, hex);
  const latest = kitLatest(req.name);
  const existing = await api.inspectImage(ref);
  if (existing && existing.labels[ROOTFS_LABEL] === rootfs) {
    // The last build is this one again: `latest` follows it.
    await api.tagImage(existing.id, { repo, tag: "latest" });
    return { id: existing.id, ref, latest, rootfs, bytes: tar.length, built: false };
  }
  req.onProgress?.(`importing ${(tar.length / 1e6).toFixed(1)} MB as ${ref}`);
  const id = await api.importImage(tar, { repo, tag }, [
    `ENV PATH=${IMAGE_PATH}`,
    `LABEL ${KIT_LABEL}=${req.name} ${ROOTFS_LABEL}=${rootfs}`,
    'CMD ["/bin/sh"]',
  ]);
  await api.tagImage(id, { repo, tag: "latest" });
  return { id, ref, latest, rootfs, bytes: tar.length, built: true };
}

/**
 * Owner object: a model with optimizer state or model copies hanging off
 * its attributes (`trainer.ema.ema`, `trainer.optimizer`, `trainer.model`:
 * an Ultralytics YOLO after `train()`, a hand-written trainer). Evidence:
 * each part's path and bytes. Warning when the parts hold at least
 * {@link OWNER_WARN_BYTES} on one CUDA device, else info.
 *
 * Fix: "Delete <var>…" only where one user variable holds the model through
 * an attribute path (`trainer.model` → `trainer`; not a list such as
 * `runs[0].model`, which may hold more) and no other variable reaches it, so
 * that deleting it frees the model and its parts (bytes: both); else no
 * button (bytes: the parts, what dropping the owner would return).
 */
import { formatBytes, formatPlacement, sumBytes } from '../format';
import { isPythonIdentifier } from '../cleanup';
import {
  addBytes,
  maxCudaBytes,
  modelAndParts,
  modelName,
  userModels
} from './models';
import type { FindingFix, FindingRule, IFinding } from './types';

/** Parts on one CUDA device from which an owner object is a warning (64 MiB). */
export const OWNER_WARN_BYTES = 64 * 2 ** 20;

/** The owner-object rule: one finding per model with optimizer state or model copies. */
export const ownerObjectRule: FindingRule = ({ inventory }) =>
  userModels(inventory).flatMap((model): IFinding[] => {
    const parts = (model.parts ?? []).filter(
      p => p.kind === 'optimizer' || p.kind === 'model'
    );
    // A stale model's parts go with it: the stale-model finding frees both.
    if (!parts.length || model.stale) {
      return [];
    }
    const all = model.parts ?? [];
    const partBytes: Record<string, number> = {};
    all.forEach(p => addBytes(partBytes, p.bytes));
    const variables = model.holders.filter(h => h.kind === 'variable');
    const roots = [...new Set(variables.map(h => h.name))];
    const owner =
      roots.length === 1 &&
      isPythonIdentifier(roots[0]) &&
      variables.every(
        h => h.path.length > h.name.length && h.path[h.name.length] === '.'
      )
        ? roots[0]
        : null;
    const fix: FindingFix =
      owner !== null
        ? { kind: 'delete', modelId: model.id, names: [owner] }
        : { kind: 'none' };
    const bytes = owner !== null ? modelAndParts(model) : partBytes;
    const where = variables[0]?.path ?? modelName(model);
    const owners = [...new Set(all.map(p => p.path.split(/[.[]/)[0]))];
    const subject = owners.map(o => `${where}.${o}`).join(', ');
    const name = modelName(model);
    return [
      {
        kind: 'owner-object',
        id: `owner-object:${model.id}`,
        severity:
          maxCudaBytes(partBytes) >= OWNER_WARN_BYTES ? 'warning' : 'info',
        subject,
        bytes,
        explain: trans =>
          owner !== null
            ? trans.__(
                '%1 holds %2 together with optimizer state or model copies (%3): deleting %1 frees them all, %4.',
                owner,
                name,
                formatBytes(sumBytes(partBytes)),
                formatBytes(sumBytes(bytes))
              )
            : trans.__(
                '%1 keeps optimizer state or model copies next to %2: %3.',
                subject,
                name,
                formatBytes(sumBytes(partBytes))
              ),
        evidence: all.map(
          p => `${p.path} (${p.className}): ${formatPlacement(p.bytes)}`
        ),
        fix
      }
    ];
  });

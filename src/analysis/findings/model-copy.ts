/**
 * Model copies: a model a user variable names that was made without its
 * constructor (`copied`: `copy.deepcopy`, a whole-model `torch.load`), as an
 * EMA or a best checkpoint is kept on purpose. It is never a stacked
 * instance (`findStackedModels` leaves it out) and Clean GPU keeps it; this
 * info says what it costs on the GPU and what it is a copy of: an older
 * model built by its constructor with as many parameters and bytes, when
 * one is alive (the model itself, or a wrapper around it: `torch.compile`'s).
 *
 * Bytes: the model and its parts. Only where it is on a CUDA device. Fix:
 * **Move to CPU…** (asks; Delete is offered in the same dialog) of the
 * variable that names it, when that variable keeps it alone (moving a
 * model another name shares would move that one too); else none.
 */
import {
  formatBytes,
  formatPlacement,
  isCudaDevice,
  sumBytes
} from '../format';
import { isPythonIdentifier } from '../python';
import type { FindingRule, IFinding } from './types';
import {
  maxCudaBytes,
  modelAndParts,
  modelName,
  namesModel,
  userModels
} from './user-models';

/** The model-copy rule: one info per named copy on a CUDA device. */
export const modelCopyRule: FindingRule = ({ inventory }) => {
  if (!inventory) {
    return [];
  }
  const models = userModels(inventory);
  const found: IFinding[] = [];
  for (const model of models) {
    if (!model.copied || model.stale) {
      continue;
    }
    const bytes = modelAndParts(model);
    if (maxCudaBytes(bytes) <= 0) {
      continue;
    }
    const names = [
      ...new Set(model.holders.filter(namesModel).map(h => h.path || h.name))
    ];
    const subject = names.join(', ');
    const original = models
      .filter(
        m =>
          m !== model &&
          m.order < model.order &&
          !m.copied &&
          m.parameters === model.parameters &&
          sumBytes(m.bytes) === sumBytes(model.bytes)
      )
      // the first variable that names it or the module it wraps (`model` under `compiled`)
      .map(m => m.holders.find(h => h.kind === 'variable')?.name)
      .find(name => name !== undefined);
    const variable = model.holders.find(
      h => namesModel(h) && h.path === h.name
    )?.name;
    const root = inventory.roots.find(
      r => r.kind === 'variable' && r.name === variable
    );
    const movable =
      variable !== undefined &&
      isPythonIdentifier(variable) &&
      root !== undefined &&
      sumBytes(root.shared ?? {}, isCudaDevice) === 0;
    found.push({
      kind: 'model-copy',
      id: `model-copy:${model.id}`,
      severity: 'info',
      subject,
      bytes,
      explain: trans =>
        original
          ? trans.__(
              '%1 holds a copy of %2 (%3), made without its constructor (copy.deepcopy or a whole-model torch.load): %4, kept as you made it. Move it to the CPU when it need not stay on the GPU.',
              subject,
              original,
              modelName(model),
              formatPlacement(bytes, trans)
            )
          : trans.__(
              '%1 holds %2, a copy made without its constructor (copy.deepcopy or a whole-model torch.load): %3, kept as you made it. Move it to the CPU when it need not stay on the GPU.',
              subject,
              modelName(model),
              formatPlacement(bytes, trans)
            ),
      evidence: names.length ? names : [formatBytes(sumBytes(bytes))],
      fix:
        movable && variable !== undefined
          ? { kind: 'tensors', name: variable }
          : { kind: 'none' }
    });
  }
  return found;
};

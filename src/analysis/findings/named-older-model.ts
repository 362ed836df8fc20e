/**
 * Named older model: two models of one family (`stackingKey`), the older
 * one still named by a user variable — "m still holds YOLO (yolov8n.yaml),
 * 12.1 MiB". Info: the user may still want it. The fix asks first: "Delete
 * m…" (the variables that bind the model itself, identifiers only). When
 * none does and variables keep it through their attributes (a transformers
 * `pipeline` built on the model before `model` was rebound: `pipe.model`),
 * the finding says that wrapper still runs the old model and the fix is
 * "Delete pipe…" — never the model's old name, which would free nothing;
 * else no button. An older instance nothing names is the
 * `stale-model` warning instead; modules nothing reaches and parts never
 * make a stack (`findStackedModels`).
 */
import { deletableNames, wrapperNames } from '../memory/holders';
import { formatBytes, listNames, sumBytes } from '../format';
import { findStackedModels, holderNames } from '../memory/stacking';
import { modelAndParts, modelName, namesModel } from './user-models';
import type { FindingRule, IFinding } from './types';

/** The named-older-model rule: one finding per older instance still named. */
export const namedOlderModelRule: FindingRule = ({ inventory }) => {
  if (!inventory) {
    return [];
  }
  return findStackedModels(inventory).flatMap(group =>
    group.older
      .filter(m => !m.stale)
      .map((model): IFinding => {
        const names = holderNames({
          ...model,
          holders: model.holders.filter(namesModel)
        });
        const deletable = deletableNames(model);
        const wrappers = wrapperNames(model, inventory);
        const paths = [
          ...new Set(
            model.holders
              .filter(h => namesModel(h) && wrappers.includes(h.name))
              .map(h => h.path)
          )
        ];
        const bytes = modelAndParts(model);
        const subject = [...new Set(names)].join(', ');
        const name = modelName(model);
        const newer = modelName(group.newest);
        return {
          kind: 'named-older-model',
          id: `named-older-model:${model.id}`,
          severity: 'info',
          subject,
          bytes,
          explain: trans =>
            !deletable.length && wrappers.length
              ? trans.__(
                  '%1 still holds %2, %3, while a newer %4 is loaded: %5 still runs the old one. Delete %5, or build it again on the new model, to free it.',
                  listNames(paths, 3, trans),
                  name,
                  formatBytes(sumBytes(bytes)),
                  newer,
                  wrappers.join(', ')
                )
              : trans.__(
                  '%1 still holds %2, %3, while a newer %4 is loaded.',
                  subject,
                  name,
                  formatBytes(sumBytes(bytes)),
                  newer
                ),
          evidence: [
            ...new Set(
              model.holders
                .filter(h => h.kind !== 'hidden')
                .map(h => h.path || h.name)
            )
          ],
          fix: deletable.length
            ? { kind: 'delete', modelId: model.id, names: deletable }
            : wrappers.length
              ? { kind: 'delete', modelId: model.id, names: wrappers }
              : { kind: 'none' },
          stack: group.key
        };
      })
  );
};

import {
  FINDING_RULES,
  findings,
  fixCommand,
  summarizeFindings
} from '../../../src/analysis/findings';
import { CommandIDs } from '../../../src/tokens';
import { c08Inventory, gpuSample } from '../fixtures';
import { MiB } from './helpers';

describe('findings', () => {
  it('runs every rule and sorts largest first', () => {
    const list = findings({
      inventory: c08Inventory(),
      sample: gpuSample(8000 * MiB, 80_000 * MiB),
      hello: null
    });
    expect(list.map(f => f.kind)).toEqual([
      'graph-holder',
      'cuda-context',
      'traceback-tensors',
      'owner-object'
    ]);
    expect(summarizeFindings(list)).toEqual({
      warnings: 2,
      warningBytes: 1280 * MiB,
      infos: 2
    });
    expect(FINDING_RULES).toHaveLength(15);
  });

  it('no facts, no findings', () => {
    expect(findings({ inventory: null, sample: null, hello: null })).toEqual(
      []
    );
  });

  it('maps each fix to its command', () => {
    expect(fixCommand({ kind: 'clean', plan: {} }, 'k')).toEqual({
      id: CommandIDs.clean,
      args: { kernelId: 'k' }
    });
    expect(
      fixCommand({ kind: 'clean', plan: { modelId: '0x1' } }, 'k')
    ).toEqual({
      id: CommandIDs.freeModel,
      args: { kernelId: 'k', modelId: '0x1' }
    });
    expect(
      fixCommand({ kind: 'delete', modelId: '0x1', names: ['m'] }, 'k')
    ).toEqual({
      id: CommandIDs.deleteModel,
      args: { kernelId: 'k', modelId: '0x1', names: ['m'] }
    });
    expect(fixCommand({ kind: 'detach', name: 'v' }, 'k')).toEqual({
      id: CommandIDs.fixGraphHolder,
      args: { kernelId: 'k', name: 'v' }
    });
    expect(fixCommand({ kind: 'restart', bytes: {} }, 'k')).toEqual({
      id: CommandIDs.restartKernel,
      args: { kernelId: 'k' }
    });
    expect(fixCommand({ kind: 'none' }, 'k')).toBeNull();
  });
});

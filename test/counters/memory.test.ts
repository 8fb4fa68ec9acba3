import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { counterStoreContract } from './contract.ts';

counterStoreContract('MemoryCounterStore', async () => ({ store: new MemoryCounterStore(), close: async () => {} }));

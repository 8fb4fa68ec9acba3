import { MemoryStorage, MemoryStore } from '../../src/storage/memory.ts';
import { storageContracts } from './contract.ts';
import type { InspectableStorage } from './harness.ts';

storageContracts('memory', {
  async freshStore() {
    const store = new MemoryStore();
    return {
      async open(): Promise<InspectableStorage> {
        const storage = new MemoryStorage(store);
        await storage.migrate();
        return storage;
      },
    };
  },
});

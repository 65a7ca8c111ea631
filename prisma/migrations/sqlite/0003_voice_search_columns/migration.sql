-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_Voice" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "orgId" TEXT,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "language" TEXT NOT NULL DEFAULT 'en',
    "gender" TEXT NOT NULL DEFAULT '',
    "tags" JSONB NOT NULL,
    "searchText" TEXT NOT NULL DEFAULT '',
    "tagIndex" TEXT NOT NULL DEFAULT '',
    "featured" BOOLEAN NOT NULL DEFAULT false,
    "kind" TEXT NOT NULL DEFAULT 'library',
    "parentVoiceId" TEXT,
    "sourceAudioBlobId" TEXT,
    "sourceTranscript" TEXT,
    "sourceMetadata" JSONB,
    "sourceVersion" TEXT NOT NULL DEFAULT '1',
    "modelFamily" TEXT NOT NULL DEFAULT '',
    "sampleBlobId" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    "deletedAt" DATETIME,
    CONSTRAINT "Voice_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_Voice" ("createdAt", "deletedAt", "description", "featured", "gender", "id", "kind", "language", "modelFamily", "name", "orgId", "parentVoiceId", "sampleBlobId", "sourceAudioBlobId", "sourceMetadata", "sourceTranscript", "sourceVersion", "tags", "updatedAt") SELECT "createdAt", "deletedAt", "description", "featured", "gender", "id", "kind", "language", "modelFamily", "name", "orgId", "parentVoiceId", "sampleBlobId", "sourceAudioBlobId", "sourceMetadata", "sourceTranscript", "sourceVersion", "tags", "updatedAt" FROM "Voice";
DROP TABLE "Voice";
ALTER TABLE "new_Voice" RENAME TO "Voice";
CREATE INDEX "Voice_orgId_createdAt_idx" ON "Voice"("orgId", "createdAt");
CREATE INDEX "Voice_createdAt_id_idx" ON "Voice"("createdAt", "id");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

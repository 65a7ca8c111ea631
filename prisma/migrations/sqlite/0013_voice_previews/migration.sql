-- Voices' greeting samples (Voice.sampleBlobId) are previews now (VoicePreview, remade by the
-- preview worker): the old ones leave their org's storage before the column goes.
UPDATE "Org" SET "blobBytes" = "blobBytes" - COALESCE((
    SELECT SUM(b."sizeBytes") FROM "Blob" b
     WHERE b."orgId" = "Org"."id" AND b."deletedAt" IS NULL
       AND b."id" IN (SELECT "sampleBlobId" FROM "Voice" WHERE "sampleBlobId" IS NOT NULL)), 0);
UPDATE "Blob" SET "deletedAt" = strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')
 WHERE "deletedAt" IS NULL AND "id" IN (SELECT "sampleBlobId" FROM "Voice" WHERE "sampleBlobId" IS NOT NULL);

-- CreateTable
CREATE TABLE "VoicePreview" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "voiceId" TEXT NOT NULL,
    "modelId" TEXT NOT NULL,
    "stamp" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "blobId" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "runAfter" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lockedBy" TEXT,
    "lockedUntil" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "VoicePreview_voiceId_fkey" FOREIGN KEY ("voiceId") REFERENCES "Voice" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

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
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    "deletedAt" DATETIME,
    CONSTRAINT "Voice_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_Voice" ("createdAt", "deletedAt", "description", "featured", "gender", "id", "kind", "language", "modelFamily", "name", "orgId", "parentVoiceId", "searchText", "sourceAudioBlobId", "sourceMetadata", "sourceTranscript", "sourceVersion", "tagIndex", "tags", "updatedAt") SELECT "createdAt", "deletedAt", "description", "featured", "gender", "id", "kind", "language", "modelFamily", "name", "orgId", "parentVoiceId", "searchText", "sourceAudioBlobId", "sourceMetadata", "sourceTranscript", "sourceVersion", "tagIndex", "tags", "updatedAt" FROM "Voice";
DROP TABLE "Voice";
ALTER TABLE "new_Voice" RENAME TO "Voice";
CREATE INDEX "Voice_orgId_createdAt_idx" ON "Voice"("orgId", "createdAt");
CREATE INDEX "Voice_createdAt_id_idx" ON "Voice"("createdAt", "id");
CREATE TABLE "new_VoiceProfile" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "voiceId" TEXT NOT NULL,
    "modelId" TEXT NOT NULL,
    "upstreamId" TEXT NOT NULL,
    "profileVersion" TEXT NOT NULL DEFAULT '1',
    "sourceVersion" TEXT NOT NULL DEFAULT '1',
    "status" TEXT NOT NULL DEFAULT 'ready',
    "params" JSONB,
    "error" TEXT,
    "cachedAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME,
    "madeByClone" BOOLEAN NOT NULL DEFAULT false,
    "updatedAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "VoiceProfile_voiceId_fkey" FOREIGN KEY ("voiceId") REFERENCES "Voice" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "VoiceProfile_modelId_fkey" FOREIGN KEY ("modelId") REFERENCES "Model" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_VoiceProfile" ("cachedAt", "error", "expiresAt", "id", "madeByClone", "modelId", "params", "profileVersion", "sourceVersion", "status", "upstreamId", "voiceId") SELECT "cachedAt", "error", "expiresAt", "id", "madeByClone", "modelId", "params", "profileVersion", "sourceVersion", "status", "upstreamId", "voiceId" FROM "VoiceProfile";
DROP TABLE "VoiceProfile";
ALTER TABLE "new_VoiceProfile" RENAME TO "VoiceProfile";
CREATE UNIQUE INDEX "VoiceProfile_voiceId_modelId_key" ON "VoiceProfile"("voiceId", "modelId");
CREATE TABLE "new_Blob" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "orgId" TEXT,
    "contentType" TEXT NOT NULL,
    "sizeBytes" INTEGER NOT NULL,
    "sha256" TEXT NOT NULL,
    "storageKey" TEXT NOT NULL,
    "durationMs" INTEGER,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deletedAt" DATETIME,
    CONSTRAINT "Blob_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_Blob" ("contentType", "createdAt", "deletedAt", "durationMs", "id", "orgId", "sha256", "sizeBytes", "storageKey") SELECT "contentType", "createdAt", "deletedAt", "durationMs", "id", "orgId", "sha256", "sizeBytes", "storageKey" FROM "Blob";
DROP TABLE "Blob";
ALTER TABLE "new_Blob" RENAME TO "Blob";
CREATE INDEX "Blob_orgId_idx" ON "Blob"("orgId");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE INDEX "VoicePreview_status_runAfter_idx" ON "VoicePreview"("status", "runAfter");

-- CreateIndex
CREATE UNIQUE INDEX "VoicePreview_voiceId_modelId_key" ON "VoicePreview"("voiceId", "modelId");

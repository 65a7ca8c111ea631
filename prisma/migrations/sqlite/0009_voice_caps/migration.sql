-- CreateTable
CREATE TABLE "EngineClone" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "orgId" TEXT NOT NULL,
    "modelId" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "EngineClone_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
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
    CONSTRAINT "VoiceProfile_voiceId_fkey" FOREIGN KEY ("voiceId") REFERENCES "Voice" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "VoiceProfile_modelId_fkey" FOREIGN KEY ("modelId") REFERENCES "Model" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_VoiceProfile" ("cachedAt", "error", "expiresAt", "id", "modelId", "params", "profileVersion", "sourceVersion", "status", "upstreamId", "voiceId") SELECT "cachedAt", "error", "expiresAt", "id", "modelId", "params", "profileVersion", "sourceVersion", "status", "upstreamId", "voiceId" FROM "VoiceProfile";
DROP TABLE "VoiceProfile";
ALTER TABLE "new_VoiceProfile" RENAME TO "VoiceProfile";
CREATE UNIQUE INDEX "VoiceProfile_voiceId_modelId_key" ON "VoiceProfile"("voiceId", "modelId");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE INDEX "EngineClone_orgId_createdAt_idx" ON "EngineClone"("orgId", "createdAt");

-- CreateTable
CREATE TABLE "KeyHold" (
    "ownerId" TEXT NOT NULL,
    "apiKeyId" TEXT NOT NULL,
    "amountMicros" BIGINT NOT NULL,
    "expiresAt" DATETIME NOT NULL,

    PRIMARY KEY ("ownerId", "apiKeyId"),
    CONSTRAINT "KeyHold_apiKeyId_fkey" FOREIGN KEY ("apiKeyId") REFERENCES "ApiKey" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_ApiKey" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "orgId" TEXT NOT NULL,
    "name" TEXT NOT NULL DEFAULT '',
    "hash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'active',
    "isTrial" BOOLEAN NOT NULL DEFAULT false,
    "rateLimitRpm" INTEGER,
    "spendLimitMicros" BIGINT,
    "spendWindow" TEXT,
    "windowStartedAt" DATETIME,
    "windowSpentMicros" BIGINT NOT NULL DEFAULT 0,
    "heldMicros" BIGINT NOT NULL DEFAULT 0,
    "expiresAt" DATETIME,
    "allowedModels" JSONB,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" DATETIME,
    "revokedAt" DATETIME,
    CONSTRAINT "ApiKey_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_ApiKey" ("createdAt", "hash", "id", "isTrial", "lastUsedAt", "name", "orgId", "prefix", "rateLimitRpm", "revokedAt", "status") SELECT "createdAt", "hash", "id", "isTrial", "lastUsedAt", "name", "orgId", "prefix", "rateLimitRpm", "revokedAt", "status" FROM "ApiKey";
DROP TABLE "ApiKey";
ALTER TABLE "new_ApiKey" RENAME TO "ApiKey";
CREATE UNIQUE INDEX "ApiKey_hash_key" ON "ApiKey"("hash");
CREATE INDEX "ApiKey_orgId_idx" ON "ApiKey"("orgId");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE INDEX "KeyHold_expiresAt_idx" ON "KeyHold"("expiresAt");

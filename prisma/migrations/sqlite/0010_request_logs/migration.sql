-- CreateTable
CREATE TABLE "RequestLog" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "orgId" TEXT NOT NULL,
    "requestId" TEXT NOT NULL,
    "apiKeyId" TEXT,
    "apiKeyName" TEXT NOT NULL DEFAULT '',
    "kind" TEXT NOT NULL DEFAULT 'http',
    "method" TEXT NOT NULL,
    "route" TEXT NOT NULL,
    "modelId" TEXT,
    "status" INTEGER NOT NULL,
    "errorCode" TEXT,
    "upstreams" JSONB,
    "servedBy" TEXT,
    "failoverReason" TEXT,
    "userAgent" TEXT,
    "traceId" TEXT,
    "ttfbMs" REAL,
    "firstAudioMs" REAL,
    "firstAudibleMs" REAL,
    "totalMs" REAL NOT NULL,
    "inputTokens" INTEGER NOT NULL DEFAULT 0,
    "outputTokens" INTEGER NOT NULL DEFAULT 0,
    "characters" INTEGER NOT NULL DEFAULT 0,
    "audioMillis" INTEGER NOT NULL DEFAULT 0,
    "costMicros" BIGINT NOT NULL DEFAULT 0,
    "requestContent" TEXT,
    "responseContent" TEXT,
    "createdAt" DATETIME NOT NULL
);

-- CreateTable
CREATE TABLE "RequestLogTurn" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "requestLogId" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "turnIndex" INTEGER NOT NULL,
    "startMs" REAL NOT NULL,
    "speechEndMs" REAL,
    "endOfTurnMs" REAL,
    "llmFirstTokenMs" REAL,
    "ttsFirstAudioMs" REAL,
    "firstAudibleMs" REAL,
    "bargeInMs" REAL,
    "failoverReason" TEXT,
    "userText" TEXT,
    "assistantText" TEXT,
    "createdAt" DATETIME NOT NULL
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_Org" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "name" TEXT NOT NULL,
    "balanceMicros" BIGINT NOT NULL DEFAULT 0,
    "heldMicros" BIGINT NOT NULL DEFAULT 0,
    "blobBytes" BIGINT NOT NULL DEFAULT 0,
    "isTrial" BOOLEAN NOT NULL DEFAULT false,
    "logContent" BOOLEAN NOT NULL DEFAULT false,
    "logRetentionDays" INTEGER,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL
);
INSERT INTO "new_Org" ("balanceMicros", "blobBytes", "createdAt", "heldMicros", "id", "isTrial", "name", "updatedAt") SELECT "balanceMicros", "blobBytes", "createdAt", "heldMicros", "id", "isTrial", "name", "updatedAt" FROM "Org";
DROP TABLE "Org";
ALTER TABLE "new_Org" RENAME TO "Org";
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE INDEX "RequestLog_orgId_createdAt_idx" ON "RequestLog"("orgId", "createdAt");

-- CreateIndex
CREATE INDEX "RequestLog_orgId_requestId_idx" ON "RequestLog"("orgId", "requestId");

-- CreateIndex
CREATE INDEX "RequestLog_createdAt_idx" ON "RequestLog"("createdAt");

-- CreateIndex
CREATE INDEX "RequestLogTurn_requestLogId_turnIndex_idx" ON "RequestLogTurn"("requestLogId", "turnIndex");

-- CreateIndex
CREATE INDEX "RequestLogTurn_createdAt_idx" ON "RequestLogTurn"("createdAt");

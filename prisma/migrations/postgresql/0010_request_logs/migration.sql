-- AlterTable
ALTER TABLE "Org" ADD COLUMN     "logContent" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "logRetentionDays" INTEGER;

-- CreateTable
CREATE TABLE "RequestLog" (
    "id" TEXT NOT NULL,
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
    "ttfbMs" DOUBLE PRECISION,
    "firstAudioMs" DOUBLE PRECISION,
    "firstAudibleMs" DOUBLE PRECISION,
    "totalMs" DOUBLE PRECISION NOT NULL,
    "inputTokens" INTEGER NOT NULL DEFAULT 0,
    "outputTokens" INTEGER NOT NULL DEFAULT 0,
    "characters" INTEGER NOT NULL DEFAULT 0,
    "audioMillis" INTEGER NOT NULL DEFAULT 0,
    "costMicros" BIGINT NOT NULL DEFAULT 0,
    "requestContent" TEXT,
    "responseContent" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "RequestLog_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "RequestLogTurn" (
    "id" TEXT NOT NULL,
    "requestLogId" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "turnIndex" INTEGER NOT NULL,
    "startMs" DOUBLE PRECISION NOT NULL,
    "speechEndMs" DOUBLE PRECISION,
    "endOfTurnMs" DOUBLE PRECISION,
    "llmFirstTokenMs" DOUBLE PRECISION,
    "ttsFirstAudioMs" DOUBLE PRECISION,
    "firstAudibleMs" DOUBLE PRECISION,
    "bargeInMs" DOUBLE PRECISION,
    "failoverReason" TEXT,
    "userText" TEXT,
    "assistantText" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "RequestLogTurn_pkey" PRIMARY KEY ("id")
);

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

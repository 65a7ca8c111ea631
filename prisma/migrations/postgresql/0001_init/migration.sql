-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateEnum
CREATE TYPE "MemberRole" AS ENUM ('owner', 'member');

-- CreateEnum
CREATE TYPE "ApiKeyStatus" AS ENUM ('active', 'revoked');

-- CreateEnum
CREATE TYPE "LedgerKind" AS ENUM ('grant', 'usage', 'refund', 'transfer', 'adjustment');

-- CreateEnum
CREATE TYPE "Modality" AS ENUM ('llm', 'tts', 'stt');

-- CreateEnum
CREATE TYPE "ModelStatus" AS ENUM ('active', 'disabled');

-- CreateEnum
CREATE TYPE "UpstreamHealth" AS ENUM ('unknown', 'up', 'down');

-- CreateEnum
CREATE TYPE "VoiceKind" AS ENUM ('library', 'instant_clone', 'pro_clone', 'localized');

-- CreateEnum
CREATE TYPE "ProfileStatus" AS ENUM ('queued', 'ready', 'failed');

-- CreateEnum
CREATE TYPE "JobKind" AS ENUM ('instant_clone', 'pro_clone', 'localize', 'prepare_profile');

-- CreateEnum
CREATE TYPE "JobStatus" AS ENUM ('queued', 'running', 'succeeded', 'failed');

-- CreateEnum
CREATE TYPE "RegistrationType" AS ENUM ('anonymous', 'service_auth');

-- CreateEnum
CREATE TYPE "RegistrationStatus" AS ENUM ('pending', 'claimed');

-- CreateEnum
CREATE TYPE "ClaimAttemptStatus" AS ENUM ('pending', 'confirmed', 'denied');

-- CreateTable
CREATE TABLE "Org" (
    "id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "balanceMicros" BIGINT NOT NULL DEFAULT 0,
    "isTrial" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Org_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "User" (
    "id" TEXT NOT NULL,
    "email" TEXT NOT NULL,
    "name" TEXT,
    "passwordHash" TEXT,
    "isPlatformAdmin" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "User_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Membership" (
    "userId" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "role" "MemberRole" NOT NULL DEFAULT 'member',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Membership_pkey" PRIMARY KEY ("userId","orgId")
);

-- CreateTable
CREATE TABLE "ApiKey" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "name" TEXT NOT NULL DEFAULT '',
    "hash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "status" "ApiKeyStatus" NOT NULL DEFAULT 'active',
    "isTrial" BOOLEAN NOT NULL DEFAULT false,
    "rateLimitRpm" INTEGER,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" TIMESTAMP(3),
    "revokedAt" TIMESTAMP(3),

    CONSTRAINT "ApiKey_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "LedgerEntry" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "kind" "LedgerKind" NOT NULL,
    "amountMicros" BIGINT NOT NULL,
    "balanceAfterMicros" BIGINT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "apiKeyId" TEXT,
    "requestId" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "LedgerEntry_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "UsageEvent" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "apiKeyId" TEXT,
    "modelId" TEXT NOT NULL,
    "modality" "Modality" NOT NULL,
    "route" TEXT NOT NULL,
    "requestId" TEXT NOT NULL,
    "inputTokens" INTEGER NOT NULL DEFAULT 0,
    "outputTokens" INTEGER NOT NULL DEFAULT 0,
    "characters" INTEGER NOT NULL DEFAULT 0,
    "audioMillis" INTEGER NOT NULL DEFAULT 0,
    "costMicros" BIGINT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "UsageEvent_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Model" (
    "id" TEXT NOT NULL,
    "modality" "Modality" NOT NULL,
    "displayName" TEXT NOT NULL DEFAULT '',
    "status" "ModelStatus" NOT NULL DEFAULT 'active',
    "priceInputPicoPerToken" BIGINT NOT NULL DEFAULT 0,
    "priceOutputPicoPerToken" BIGINT NOT NULL DEFAULT 0,
    "pricePicoPerChar" BIGINT NOT NULL DEFAULT 0,
    "pricePicoPerSecond" BIGINT NOT NULL DEFAULT 0,
    "sampleRates" JSONB,
    "capabilities" JSONB,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Model_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Upstream" (
    "id" TEXT NOT NULL,
    "modelId" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "protocol" TEXT NOT NULL,
    "upstreamModel" TEXT,
    "weight" INTEGER NOT NULL DEFAULT 1,
    "apiKeyEnv" TEXT,
    "health" "UpstreamHealth" NOT NULL DEFAULT 'unknown',
    "lastCheckedAt" TIMESTAMP(3),
    "lastError" TEXT,
    "latencyMs" INTEGER,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Upstream_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Voice" (
    "id" TEXT NOT NULL,
    "orgId" TEXT,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "language" TEXT NOT NULL DEFAULT 'en',
    "gender" TEXT NOT NULL DEFAULT '',
    "tags" JSONB NOT NULL,
    "featured" BOOLEAN NOT NULL DEFAULT false,
    "kind" "VoiceKind" NOT NULL DEFAULT 'library',
    "parentVoiceId" TEXT,
    "sourceAudioBlobId" TEXT,
    "sourceTranscript" TEXT,
    "sourceMetadata" JSONB,
    "sourceVersion" TEXT NOT NULL DEFAULT '1',
    "modelFamily" TEXT NOT NULL DEFAULT '',
    "sampleBlobId" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "deletedAt" TIMESTAMP(3),

    CONSTRAINT "Voice_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "VoiceSave" (
    "voiceId" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "VoiceSave_pkey" PRIMARY KEY ("voiceId","orgId")
);

-- CreateTable
CREATE TABLE "VoiceProfile" (
    "id" TEXT NOT NULL,
    "voiceId" TEXT NOT NULL,
    "modelId" TEXT NOT NULL,
    "upstreamId" TEXT NOT NULL,
    "profileVersion" TEXT NOT NULL DEFAULT '1',
    "sourceVersion" TEXT NOT NULL DEFAULT '1',
    "status" "ProfileStatus" NOT NULL DEFAULT 'ready',
    "params" JSONB,
    "cachedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3),

    CONSTRAINT "VoiceProfile_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Blob" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "contentType" TEXT NOT NULL,
    "sizeBytes" INTEGER NOT NULL,
    "sha256" TEXT NOT NULL,
    "storageKey" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deletedAt" TIMESTAMP(3),

    CONSTRAINT "Blob_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Job" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "kind" "JobKind" NOT NULL,
    "status" "JobStatus" NOT NULL DEFAULT 'queued',
    "voiceId" TEXT,
    "input" JSONB NOT NULL,
    "result" JSONB,
    "error" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "lockedBy" TEXT,
    "lockedUntil" TIMESTAMP(3),
    "runAfter" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Job_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "PronunciationDict" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "deletedAt" TIMESTAMP(3),

    CONSTRAINT "PronunciationDict_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "PronunciationEntry" (
    "id" TEXT NOT NULL,
    "dictId" TEXT NOT NULL,
    "position" INTEGER NOT NULL,
    "grapheme" TEXT NOT NULL,
    "alias" TEXT,
    "phoneme" TEXT,
    "caseSensitive" BOOLEAN NOT NULL DEFAULT false,

    CONSTRAINT "PronunciationEntry_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "AgentRegistration" (
    "id" TEXT NOT NULL,
    "type" "RegistrationType" NOT NULL,
    "loginHint" TEXT,
    "claimTokenHash" TEXT NOT NULL,
    "status" "RegistrationStatus" NOT NULL DEFAULT 'pending',
    "trialOrgId" TEXT,
    "trialKeyId" TEXT,
    "issuedKeyId" TEXT,
    "issuedKeySealed" TEXT,
    "deliveredAt" TIMESTAMP(3),
    "claimedByUserId" TEXT,
    "claimedOrgId" TEXT,
    "lastPollAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "AgentRegistration_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ClaimAttempt" (
    "id" TEXT NOT NULL,
    "registrationId" TEXT NOT NULL,
    "email" TEXT,
    "userCodeHash" TEXT NOT NULL,
    "status" "ClaimAttemptStatus" NOT NULL DEFAULT 'pending',
    "failedGuesses" INTEGER NOT NULL DEFAULT 0,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "decidedAt" TIMESTAMP(3),

    CONSTRAINT "ClaimAttempt_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ServerSecret" (
    "name" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ServerSecret_pkey" PRIMARY KEY ("name")
);

-- CreateIndex
CREATE UNIQUE INDEX "User_email_key" ON "User"("email");

-- CreateIndex
CREATE INDEX "Membership_orgId_idx" ON "Membership"("orgId");

-- CreateIndex
CREATE UNIQUE INDEX "ApiKey_hash_key" ON "ApiKey"("hash");

-- CreateIndex
CREATE INDEX "ApiKey_orgId_idx" ON "ApiKey"("orgId");

-- CreateIndex
CREATE INDEX "LedgerEntry_orgId_createdAt_idx" ON "LedgerEntry"("orgId", "createdAt");

-- CreateIndex
CREATE INDEX "UsageEvent_orgId_createdAt_idx" ON "UsageEvent"("orgId", "createdAt");

-- CreateIndex
CREATE INDEX "UsageEvent_apiKeyId_idx" ON "UsageEvent"("apiKeyId");

-- CreateIndex
CREATE UNIQUE INDEX "Upstream_modelId_url_key" ON "Upstream"("modelId", "url");

-- CreateIndex
CREATE INDEX "Voice_orgId_createdAt_idx" ON "Voice"("orgId", "createdAt");

-- CreateIndex
CREATE INDEX "Voice_createdAt_id_idx" ON "Voice"("createdAt", "id");

-- CreateIndex
CREATE INDEX "VoiceSave_orgId_idx" ON "VoiceSave"("orgId");

-- CreateIndex
CREATE UNIQUE INDEX "VoiceProfile_voiceId_modelId_key" ON "VoiceProfile"("voiceId", "modelId");

-- CreateIndex
CREATE INDEX "Blob_orgId_idx" ON "Blob"("orgId");

-- CreateIndex
CREATE INDEX "Job_status_runAfter_idx" ON "Job"("status", "runAfter");

-- CreateIndex
CREATE INDEX "Job_orgId_idx" ON "Job"("orgId");

-- CreateIndex
CREATE INDEX "PronunciationDict_orgId_idx" ON "PronunciationDict"("orgId");

-- CreateIndex
CREATE INDEX "PronunciationEntry_dictId_position_idx" ON "PronunciationEntry"("dictId", "position");

-- CreateIndex
CREATE UNIQUE INDEX "AgentRegistration_claimTokenHash_key" ON "AgentRegistration"("claimTokenHash");

-- CreateIndex
CREATE INDEX "ClaimAttempt_registrationId_idx" ON "ClaimAttempt"("registrationId");

-- CreateIndex
CREATE INDEX "ClaimAttempt_userCodeHash_idx" ON "ClaimAttempt"("userCodeHash");

-- AddForeignKey
ALTER TABLE "Membership" ADD CONSTRAINT "Membership_userId_fkey" FOREIGN KEY ("userId") REFERENCES "User"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Membership" ADD CONSTRAINT "Membership_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ApiKey" ADD CONSTRAINT "ApiKey_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "LedgerEntry" ADD CONSTRAINT "LedgerEntry_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "UsageEvent" ADD CONSTRAINT "UsageEvent_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Upstream" ADD CONSTRAINT "Upstream_modelId_fkey" FOREIGN KEY ("modelId") REFERENCES "Model"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Voice" ADD CONSTRAINT "Voice_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "VoiceSave" ADD CONSTRAINT "VoiceSave_voiceId_fkey" FOREIGN KEY ("voiceId") REFERENCES "Voice"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "VoiceSave" ADD CONSTRAINT "VoiceSave_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "VoiceProfile" ADD CONSTRAINT "VoiceProfile_voiceId_fkey" FOREIGN KEY ("voiceId") REFERENCES "Voice"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "VoiceProfile" ADD CONSTRAINT "VoiceProfile_modelId_fkey" FOREIGN KEY ("modelId") REFERENCES "Model"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Blob" ADD CONSTRAINT "Blob_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Job" ADD CONSTRAINT "Job_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "PronunciationDict" ADD CONSTRAINT "PronunciationDict_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "PronunciationEntry" ADD CONSTRAINT "PronunciationEntry_dictId_fkey" FOREIGN KEY ("dictId") REFERENCES "PronunciationDict"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ClaimAttempt" ADD CONSTRAINT "ClaimAttempt_registrationId_fkey" FOREIGN KEY ("registrationId") REFERENCES "AgentRegistration"("id") ON DELETE CASCADE ON UPDATE CASCADE;

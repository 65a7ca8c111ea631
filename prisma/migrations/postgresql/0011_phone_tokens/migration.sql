-- CreateTable
CREATE TABLE "PhoneToken" (
    "id" TEXT NOT NULL,
    "orgId" TEXT NOT NULL,
    "apiKeyId" TEXT NOT NULL,
    "profile" TEXT NOT NULL,
    "name" TEXT NOT NULL DEFAULT '',
    "hash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lastUsedAt" TIMESTAMP(3),
    "revokedAt" TIMESTAMP(3),

    CONSTRAINT "PhoneToken_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "PhoneToken_hash_key" ON "PhoneToken"("hash");

-- CreateIndex
CREATE INDEX "PhoneToken_orgId_idx" ON "PhoneToken"("orgId");

-- CreateIndex
CREATE INDEX "PhoneToken_apiKeyId_idx" ON "PhoneToken"("apiKeyId");

-- AddForeignKey
ALTER TABLE "PhoneToken" ADD CONSTRAINT "PhoneToken_orgId_fkey" FOREIGN KEY ("orgId") REFERENCES "Org"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "PhoneToken" ADD CONSTRAINT "PhoneToken_apiKeyId_fkey" FOREIGN KEY ("apiKeyId") REFERENCES "ApiKey"("id") ON DELETE CASCADE ON UPDATE CASCADE;

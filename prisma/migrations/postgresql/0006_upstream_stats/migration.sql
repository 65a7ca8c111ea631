-- CreateTable
CREATE TABLE "UpstreamStat" (
    "upstreamId" TEXT NOT NULL,
    "minute" TIMESTAMP(3) NOT NULL,
    "requests" INTEGER NOT NULL DEFAULT 0,
    "errors" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "UpstreamStat_pkey" PRIMARY KEY ("upstreamId","minute")
);

-- CreateIndex
CREATE INDEX "UpstreamStat_minute_idx" ON "UpstreamStat"("minute");

-- AddForeignKey
ALTER TABLE "UpstreamStat" ADD CONSTRAINT "UpstreamStat_upstreamId_fkey" FOREIGN KEY ("upstreamId") REFERENCES "Upstream"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- CreateTable
CREATE TABLE "UpstreamStat" (
    "upstreamId" TEXT NOT NULL,
    "minute" DATETIME NOT NULL,
    "requests" INTEGER NOT NULL DEFAULT 0,
    "errors" INTEGER NOT NULL DEFAULT 0,

    PRIMARY KEY ("upstreamId", "minute"),
    CONSTRAINT "UpstreamStat_upstreamId_fkey" FOREIGN KEY ("upstreamId") REFERENCES "Upstream" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "UpstreamStat_minute_idx" ON "UpstreamStat"("minute");

-- The analysts' questions, as BigQuery SQL over ferry's tables.
-- Replace `PROJECT.ferry` with your dataset (FERRY_BQ_PROJECT.FERRY_BQ_DATASET).
-- The tables' schema is schema/transfers.json and schema/chunks.json.

-- 1. Which method is fastest per size tier? (the seeds' summary table)
SELECT
  tier,
  method,
  COUNT(*) AS runs,
  ROUND(AVG(size_bytes) / 1e6, 1) AS size_mb,
  ROUND(AVG(wire_bytes) / 1e6, 1) AS wire_mb,
  ROUND(APPROX_QUANTILES(total_ms, 2)[OFFSET(1)] / 1000, 2) AS median_s,
  ROUND(APPROX_QUANTILES(raw_mbps, 2)[OFFSET(1)], 1) AS median_mb_per_s
FROM `PROJECT.ferry.transfers`
WHERE status = 'ok'
GROUP BY tier, method
ORDER BY tier, median_mb_per_s DESC;

-- 2. What does each codec buy? Ratio against compression speed, per level.
SELECT
  codec,
  level,
  COUNT(*) AS runs,
  ROUND(SUM(size_bytes) / SUM(wire_bytes), 2) AS ratio,
  ROUND(SUM(size_bytes) / 1e6 / (SUM(compress_ms) / 1000), 1) AS compress_mb_per_s,
  ROUND(SUM(wire_bytes) / 1e6 / NULLIF(SUM(upload_ms) / 1000, 0), 1) AS upload_wire_mb_per_s
FROM `PROJECT.ferry.transfers`
WHERE status = 'ok' AND compress_ms > 0
GROUP BY codec, level
ORDER BY ratio DESC;

-- 3. How does throughput change with workers and chunk size?
SELECT
  tier,
  workers,
  chunk_size / 1048576 AS chunk_mib,
  COUNT(*) AS runs,
  ROUND(APPROX_QUANTILES(raw_mbps, 2)[OFFSET(1)], 1) AS median_mb_per_s,
  ROUND(APPROX_QUANTILES(wire_mbps, 2)[OFFSET(1)], 1) AS median_upload_wire_mb_per_s
FROM `PROJECT.ferry.transfers`
WHERE status = 'ok'
GROUP BY tier, workers, chunk_mib
ORDER BY tier, workers, chunk_mib;

-- 4. Where does the time go? Share of each stage in the total, per method and tier.
-- The stages overlap (workers upload while the producer compresses), so the
-- shares can add up to more than 100 %.
SELECT
  method,
  tier,
  ROUND(AVG(SAFE_DIVIDE(compress_ms, total_ms)) * 100, 1) AS compress_pct,
  ROUND(AVG(SAFE_DIVIDE(upload_ms, total_ms)) * 100, 1) AS upload_pct,
  ROUND(AVG(SAFE_DIVIDE(compose_ms, total_ms)) * 100, 1) AS compose_pct,
  ROUND(AVG(SAFE_DIVIDE(verify_ms, total_ms)) * 100, 1) AS verify_pct,
  ROUND(AVG(total_ms) / 1000, 2) AS avg_total_s
FROM `PROJECT.ferry.transfers`
WHERE status = 'ok'
GROUP BY method, tier
ORDER BY tier, method;

-- 5. Stragglers and slow workers: each worker's upload speed and retries.
SELECT
  worker,
  COUNT(*) AS chunks,
  ROUND(SUM(wire_bytes) / 1e6 / (SUM(upload_ms) / 1000), 1) AS wire_mb_per_s,
  APPROX_QUANTILES(upload_ms, 100)[OFFSET(99)] AS p99_upload_ms,
  COUNTIF(attempts > 1) AS redelivered
FROM `PROJECT.ferry.chunks`
WHERE uploaded_at > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 7 DAY)
GROUP BY worker
ORDER BY wire_mb_per_s;

-- 6. The slowest chunks of one transfer.
SELECT file, chunk, worker, attempts, upload_ms, wire_bytes
FROM `PROJECT.ferry.chunks`
WHERE transfer_id = @transfer_id
ORDER BY upload_ms DESC
LIMIT 20;

-- 7. Failures and their causes, recent first.
SELECT finished_at, transfer_id, method, destination, error
FROM `PROJECT.ferry.transfers`
WHERE status = 'failed'
ORDER BY finished_at DESC
LIMIT 50;

-- 8. Where the level adapted (level = 0): which levels did the chunks use,
-- per method and tier? A method whose bytes sit at level 6 was bound by
-- its link; at level 1, by its compressor (or its reader).
SELECT
  method,
  tier,
  l.level,
  SUM(l.chunks) AS chunks,
  ROUND(SUM(l.bytes) / 1e9, 2) AS raw_gb,
  ROUND(100 * SUM(l.bytes) / SUM(SUM(l.bytes)) OVER (PARTITION BY method, tier), 1) AS pct_of_bytes
FROM `PROJECT.ferry.transfers`, UNNEST(levels) AS l
WHERE status = 'ok' AND codec = 'zstd' AND level = 0
GROUP BY method, tier, l.level
ORDER BY method, tier, l.level;

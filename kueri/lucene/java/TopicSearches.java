package kueri.helper;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TopDocs;

/**
 * Searches several queries at once, one query per Java thread, each exactly as
 * IndexSearcher.search(query, k) alone would (the same scorer, the same float sums, the same ties):
 * only the topics overlap in time. Results come back as primitive arrays (doc ids, scores), which
 * cross the Python bridge in one call each instead of one ScoreDoc object per hit.
 */
public final class TopicSearches {
    private final ExecutorService pool;
    private final List<Future<TopDocs>> futures = new ArrayList<>();

    public TopicSearches(IndexSearcher searcher, Query[] queries, int k, int threads) {
        this.pool = Executors.newFixedThreadPool(Math.max(1, threads), runnable -> {
            Thread thread = new Thread(runnable, "kueri-search");
            thread.setDaemon(true);
            return thread;
        });
        for (Query query : queries) {
            futures.add(pool.submit(() -> searcher.search(query, k)));
        }
        pool.shutdown();
    }

    /** True once every search is done (waits up to timeoutMillis). */
    public boolean done(long timeoutMillis) throws InterruptedException {
        return pool.awaitTermination(Math.max(1, timeoutMillis), TimeUnit.MILLISECONDS);
    }

    /** Doc ids of query i's hits, best first. Throws what its search failed with. */
    public int[] docs(int i) throws Exception {
        ScoreDoc[] hits = result(i).scoreDocs;
        int[] docs = new int[hits.length];
        for (int j = 0; j < hits.length; j++) {
            docs[j] = hits[j].doc;
        }
        return docs;
    }

    /** Scores of query i's hits, in the order of docs(i). */
    public float[] scores(int i) throws Exception {
        ScoreDoc[] hits = result(i).scoreDocs;
        float[] scores = new float[hits.length];
        for (int j = 0; j < hits.length; j++) {
            scores[j] = hits[j].score;
        }
        return scores;
    }

    /** Stops the searches not yet started (a search under way runs to its end on its daemon thread). */
    public void cancel() {
        pool.shutdownNow();
    }

    private TopDocs result(int i) throws Exception {
        try {
            return futures.get(i).get();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) {
                throw (Exception) cause;
            }
            throw e;
        }
    }
}

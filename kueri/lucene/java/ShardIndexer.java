package kueri.helper;

import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.index.IndexWriter;

/**
 * Indexes batches of passages into one IndexWriter on a Java thread of its own.
 *
 * <p>pyjnius must call Java from one Python thread, and Lucene's addDocument runs in the calling
 * thread: without this class one process indexes on one core. Python hands batches over (one call
 * per 1,000 passages), this thread adds them in the order given, exactly as
 * kueri.lucene.writer.DocumentWriter.add would (the same reused Document and Field objects), then
 * commits and closes the writer. Every method that may wait takes a timeout and returns, so that
 * Python regains control often enough to handle ^C and SIGTERM.
 */
public final class ShardIndexer implements Runnable {
    private static final String[][] END = new String[0][];

    private final ArrayBlockingQueue<String[][]> queue;
    private final IndexWriter writer;
    private final Document plain;
    private final Document expanded;
    private final Field id;
    private final Field contents;
    private final Field query;
    private final Thread thread;
    private volatile Throwable failure;
    private volatile boolean aborted;
    private volatile long added;

    public ShardIndexer(IndexWriter writer, Document plain, Document expanded, Field id, Field contents,
                        Field query, int capacity, String name) {
        this.queue = new ArrayBlockingQueue<>(Math.max(1, capacity));
        this.writer = writer;
        this.plain = plain;
        this.expanded = expanded;
        this.id = id;
        this.contents = contents;
        this.query = query;
        this.thread = new Thread(this, name);
        this.thread.setDaemon(true);
        this.thread.start();
    }

    /** Queues a batch (ids, texts, expansions; "" for none). False: the queue stayed full; call again. */
    public boolean offer(String[] ids, String[] texts, String[] queries, long timeoutMillis) throws Exception {
        rethrow();
        return queue.offer(new String[][] {ids, texts, queries}, timeoutMillis, TimeUnit.MILLISECONDS);
    }

    /** Marks the end of the shard: the thread commits and closes the writer after the queued batches. */
    public boolean finish(long timeoutMillis) throws Exception {
        rethrow();
        return queue.offer(END, timeoutMillis, TimeUnit.MILLISECONDS);
    }

    /** True once the shard is committed and closed; throws what the thread failed with. */
    public boolean done(long timeoutMillis) throws Exception {
        thread.join(Math.max(1, timeoutMillis));
        rethrow();
        return !thread.isAlive();
    }

    /** Passages added so far. */
    public long added() {
        return added;
    }

    /** Stops the thread and rolls the writer back (nothing is committed); waits up to timeoutMillis. */
    public void abort(long timeoutMillis) throws InterruptedException {
        aborted = true;
        queue.clear();
        queue.offer(END);
        thread.join(Math.max(1, timeoutMillis));
    }

    @Override
    public void run() {
        try {
            while (true) {
                String[][] batch = queue.take();
                if (batch == END || aborted) {
                    break;
                }
                String[] ids = batch[0];
                String[] texts = batch[1];
                String[] queries = batch[2];
                for (int i = 0; i < ids.length; i++) {
                    id.setStringValue(ids[i]);
                    contents.setStringValue(texts[i]);
                    String expansion = queries[i];
                    if (expansion != null && !expansion.isEmpty()) {
                        query.setStringValue(expansion);
                        writer.addDocument(expanded);
                    } else {
                        writer.addDocument(plain);
                    }
                }
                added += ids.length;
            }
            if (aborted) {
                writer.rollback();
            } else {
                writer.commit();
                writer.close();
            }
        } catch (Throwable t) {
            failure = t;
            try {
                writer.rollback();
            } catch (Throwable ignored) {
                // the failure above is the one to report
            }
        }
    }

    private void rethrow() throws Exception {
        Throwable t = failure;
        if (t instanceof Exception) {
            throw (Exception) t;
        }
        if (t != null) {
            throw new RuntimeException(t);
        }
    }
}

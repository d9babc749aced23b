// Run by scripts/setup-java: fails (exit 1) unless kafka-clients 4.4.0 and
// every codec it needs load, each through Kafka's own record-batch code (the
// code the producer and consumer run; 4.x keeps it in the record.internal and
// utils.internals packages): a batch of repetitive records is built with the
// codec, must come out smaller than the uncompressed one, and must read back
// record for record, which loads each codec's native library (snappy-java,
// lz4-java, zstd-jni) or fails.
//
// usage: java -cp CLASSPATH CodecCheck.java

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.record.internal.CompressionType;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.SimpleRecord;
import org.apache.kafka.common.utils.internals.AppInfoParser;

public class CodecCheck {
    public static void main(String[] args) {
        if (!AppInfoParser.getVersion().equals("4.4.0")) {
            fail("kafka-clients is " + AppInfoParser.getVersion() + ", expected 4.4.0");
        }
        SimpleRecord[] records = new SimpleRecord[50];
        for (int i = 0; i < records.length; i++) {
            records[i] = new SimpleRecord(("value " + i + " ").repeat(20).getBytes(StandardCharsets.UTF_8));
        }
        int plain = MemoryRecords.withRecords(Compression.NONE, records).sizeInBytes();
        List<String> sizes = new ArrayList<>();
        for (CompressionType type : new CompressionType[] {CompressionType.GZIP, CompressionType.SNAPPY,
                CompressionType.LZ4, CompressionType.ZSTD}) {
            MemoryRecords batch = MemoryRecords.withRecords(Compression.of(type).build(), records);
            if (batch.sizeInBytes() * 2 > plain) {
                fail(type + " batch is " + batch.sizeInBytes() + " bytes, uncompressed " + plain);
            }
            int i = 0;
            for (RecordBatch b : batch.batches()) {
                if (b.compressionType() != type) fail(type + " batch says " + b.compressionType());
                for (Record r : b) {
                    ByteBuffer want = ByteBuffer.wrap(records[i++].value().array());
                    if (!r.value().equals(want)) fail(type + " record " + (i - 1) + " differs");
                }
            }
            if (i != records.length) fail(type + " read back " + i + " of " + records.length + " records");
            sizes.add(type.name + " " + batch.sizeInBytes());
        }
        // snappy-java and zstd-jni have no Java fallback (the round trip
        // above failed if their library did not load), lz4-java quietly
        // falls back to a pure-Java codec: ask each binding.
        if (!net.jpountz.util.Native.isLoaded()) fail("lz4-java's native library did not load");
        if (!com.github.luben.zstd.util.Native.isLoaded()) fail("zstd-jni's native library did not load");
        System.out.println("kafka-clients " + AppInfoParser.getVersion() + ": batch of 50 records "
                + plain + " bytes, " + String.join(", ", sizes));
    }

    static void fail(String why) {
        System.err.println("CodecCheck: " + why);
        System.exit(1);
    }
}

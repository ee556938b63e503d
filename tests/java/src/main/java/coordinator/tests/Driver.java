package coordinator.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.utils.internals.Exit;

/**
 * One JVM for a whole test session: reads one JSON request a line on stdin, runs it (a consumer
 * scenario, an Admin call, one of Kafka's command-line tools in-process) and writes one JSON answer
 * a line on the original stdout. Everything else the JVM prints goes to stderr.
 */
public final class Driver {
    static final ObjectMapper JSON = new ObjectMapper();

    /** A tool called Exit.exit: its status, instead of ending the JVM. */
    static final class ExitCalled extends RuntimeException {
        final int status;

        ExitCalled(int status, String message) {
            super(message);
            this.status = status;
        }
    }

    public static void main(String[] args) throws Exception {
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Exit.setExitProcedure((status, message) -> {
            throw new ExitCalled(status, message);
        });
        Exit.setHaltProcedure((status, message) -> {
            throw new ExitCalled(status, message);
        });
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = requests.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode answer;
            try {
                answer = dispatch(JSON.readTree(line));
                answer.put("ok", true);
            } catch (Throwable failure) {
                answer = JSON.createObjectNode();
                answer.put("ok", false);
                answer.put("error", failure.toString());
                StringWriter trace = new StringWriter();
                failure.printStackTrace(new PrintWriter(trace));
                answer.put("trace", trace.toString());
            }
            answers.println(JSON.writeValueAsString(answer));
        }
    }

    static ObjectNode dispatch(JsonNode request) throws Exception {
        String op = request.path("op").asText();
        switch (op) {
            case "ping":
                return JSON.createObjectNode();
            case "tool":
                return ToolRunner.run(request);
            case "consume":
                return ConsumerScenario.run(request);
            case "release":
                return ConsumerScenario.release(request);
            case "admin":
                return AdminActions.run(request);
            case "produce":
                return Producing.run(request);
            case "transform":
                return Transforming.run(request);
            case "share":
                return ShareScenario.run(request);
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    /** The error a future failed with, as the simple class name of its cause ("" when none). */
    static String errorName(Throwable failure) {
        Throwable cause = failure;
        while ((cause instanceof ExecutionException || cause instanceof java.util.concurrent.CompletionException)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause.getClass().getSimpleName();
    }
}
